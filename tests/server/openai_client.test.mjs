// `fission serve` through the official `openai` package for Node (installed by scripts/setup.sh
// into .cache/npm). Run by CTest: FISSION_BIN is the binary, FISSION_NPM_DIR the npm prefix and
// FISSION_DEMO_MODEL the bundled model.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(`${process.env.FISSION_NPM_DIR}/index.js`);
const OpenAI = require('openai').default ?? require('openai');

const servers = [];

// Starts `fission serve --port 0 ...args` and resolves with {client, port, proc} once it listens.
function startServer(args, apiKey = 'unused') {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.env.FISSION_BIN, ['serve', '--port', '0', '--served-model-name', 'demo', ...args],
                       { stdio: ['ignore', 'pipe', 'pipe'] });
    servers.push(proc);
    let out = '';
    const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 60000);
    proc.stdout.on('data', (chunk) => {
      out += chunk;
      const m = out.match(/on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        const port = Number(m[1]);
        resolve({ port, proc, client: new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0 }) });
      }
    });
    proc.stderr.on('data', (chunk) => { out += chunk; });
    proc.on('exit', (code) => reject(new Error(`server exited with ${code}: ${out}`)));
  });
}

function stopServer(proc) {
  return new Promise((resolve) => {
    if (proc.exitCode !== null) return resolve(proc.exitCode);
    proc.removeAllListeners('exit');
    proc.on('exit', (code) => resolve(code));
    proc.kill('SIGTERM');
  });
}

after(async () => { for (const p of servers) await stopServer(p); });

const server = await startServer([]);
const client = server.client;
const QUESTION = 'Question: Nia has 7 marbles and wins 8 more. How many marbles does she have?\nAnswer:';

test('completions answer with usage', async () => {
  const r = await client.completions.create({ model: 'demo', prompt: QUESTION, max_tokens: 60, temperature: 0,
                                              stop: ['Question:'] });
  assert.match(r.choices[0].text, /#### 15/);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(!r.choices[0].text.includes('Question:'));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('chat answers', async () => {
  const r = await client.chat.completions.create({
    model: 'demo', temperature: 0, max_tokens: 80,
    messages: [{ role: 'user', content: 'Eli has 6 bags with 3 apples in each bag. How many apples does he have?' }] });
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.match(r.choices[0].message.content, /#### 18/);
});

test('streaming chat with usage', async () => {
  const stream = await client.chat.completions.create({
    model: 'demo', temperature: 0, max_tokens: 80, stream: true, stream_options: { include_usage: true },
    messages: [{ role: 'user', content: 'Eli has 6 bags with 3 apples in each bag. How many apples does he have?' }] });
  let text = '';
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.match(text, /#### 18/);
  assert.equal(finish, 'stop');
  assert.ok(usage && usage.completion_tokens > 5);
});

test('n completions, seeded', async () => {
  const args = { model: 'demo', prompt: QUESTION, max_tokens: 10, temperature: 0.9, n: 3, seed: 11 };
  const a = await client.completions.create(args);
  const b = await client.completions.create(args);
  assert.equal(a.choices.length, 3);
  assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
  assert.equal(a.usage.completion_tokens, 30);
});

test('logprobs and echo', async () => {
  const r = await client.completions.create({ model: 'demo', prompt: QUESTION, max_tokens: 4, temperature: 0,
                                              logprobs: 1, echo: true });
  const lp = r.choices[0].logprobs;
  assert.ok(r.choices[0].text.startsWith(QUESTION));
  assert.equal(lp.tokens.length, r.usage.prompt_tokens + 4);
  assert.equal(lp.token_logprobs[0], null);
  for (const x of lp.token_logprobs.slice(1)) assert.ok(x <= 0);
});

test('tools are accepted and answered', async () => {
  const r = await client.chat.completions.create({
    model: 'demo', temperature: 0, max_tokens: 60,
    messages: [{ role: 'user', content: 'Bo has 5 hats and gets 1 more. How many hats?' }],
    tools: [{ type: 'function', function: { name: 'add', parameters: { type: 'object', properties: {} } } }] });
  assert.match(r.choices[0].message.content, /####/);
});

test('models.retrieve, and any model name answered under that name', async () => {
  const card = await client.models.retrieve('demo');
  assert.equal(card.id, 'demo');
  const r = await client.completions.create({ model: 'deepseek-ai/DeepSeek-V3', prompt: QUESTION, max_tokens: 4 });
  assert.equal(r.model, 'deepseek-ai/DeepSeek-V3');
});

test('content parts answer as their text', async () => {
  const ask = (content) => client.chat.completions.create({
    model: 'demo', temperature: 0, max_tokens: 80, messages: [{ role: 'user', content }] });
  const parts = await ask([{ type: 'text', text: 'Eli has 6 bags with 3 apples in each bag.' },
                           { type: 'text', text: 'How many apples does he have?' }]);
  const text = await ask('Eli has 6 bags with 3 apples in each bag.\nHow many apples does he have?');
  assert.equal(parts.choices[0].message.content, text.choices[0].message.content);
});

test('errors come back as APIError with the right status', async () => {
  await assert.rejects(client.models.retrieve('other'), (e) => e.status === 404);
  await assert.rejects(client.completions.create({ model: 'demo', prompt: 'x', max_tokens: 100000 }),
                       (e) => e.status === 400 && /maximum context length/.test(e.message));
});

test('reasoning_content with a reasoning parser', async () => {
  const plain = await client.chat.completions.create({
    model: 'demo', temperature: 0, max_tokens: 30, messages: [{ role: 'user', content: 'Hi' }] });
  const thinking = await startServer(['--reasoning-parser', 'deepseek-r1']);
  const r = await thinking.client.chat.completions.create({
    model: 'demo', temperature: 0, max_tokens: 30, messages: [{ role: 'user', content: 'Hi' }] });
  assert.equal(r.choices[0].message.reasoning_content, plain.choices[0].message.content);
  assert.equal(await stopServer(thinking.proc), 0);
});

test('api key', async () => {
  const guarded = await startServer(['--api-key', 'sekret'], 'wrong');
  await assert.rejects(guarded.client.models.list(), (e) => e.status === 401);
  const ok = new OpenAI({ baseURL: `http://127.0.0.1:${guarded.port}/v1`, apiKey: 'sekret', maxRetries: 0 });
  const models = await ok.models.list();
  assert.equal(models.data[0].id, 'demo');
  assert.equal(await stopServer(guarded.proc), 0);
});

test('tool calls from a model trained to call tools', async () => {
  const fs = await import('node:fs');
  const path = await import('node:path');
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
  const rows = fs.readFileSync(path.join(root, 'tests/fixtures/demo/tool_calls.jsonl'), 'utf8')
    .trim().split('\n').map((l) => JSON.parse(l));
  const item = rows.find((r) => r.kind === 'call' && r.expected.name !== 'get_weather');
  const tools = await startServer(['--model-path', path.join(root, 'tests/fixtures/models/demo-tools'),
                                   '--tool-call-parser', 'qwen']);
  const r = await tools.client.chat.completions.create({
    model: 'demo', temperature: 0, max_tokens: 128, messages: item.messages, tools: item.tools });
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, item.expected.name);
  assert.deepEqual(JSON.parse(call.function.arguments), item.expected.arguments);
  // Streamed: the deltas assemble into the same call.
  const stream = await tools.client.chat.completions.create({
    model: 'demo', temperature: 0, max_tokens: 128, messages: item.messages, tools: item.tools, stream: true });
  let name = '';
  let args = '';
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      for (const t of c.delta?.tool_calls ?? []) {
        name += t.function?.name ?? '';
        args += t.function?.arguments ?? '';
      }
    }
  }
  assert.equal(name, item.expected.name);
  assert.deepEqual(JSON.parse(args), item.expected.arguments);
  assert.equal(await stopServer(tools.proc), 0);
});
