// `fission serve` through the official `openai` package for Node (installed by scripts/setup.sh
// into .cache/npm). Run by CTest: FISSION_BIN is the binary, FISSION_NPM_DIR the npm prefix and
// FISSION_DEMO_MODEL the bundled model. Without the package every test is skipped, saying so.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(`${process.env.FISSION_NPM_DIR}/index.js`);
let OpenAI = null;
try {
  OpenAI = require('openai').default ?? require('openai');
} catch {
  // Reported as a skipped test below.
}

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

if (OpenAI === null) {
  test('the openai client', { skip: `no openai package under ${process.env.FISSION_NPM_DIR} (scripts/setup.sh installs it)` },
       () => {});
} else {
  await main();
}

// Every test, once the client is there.
async function main() {
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

  // The demo model's template renders the tools and the model was trained to call them, so its
  // reply is an answer or a call in the template's <tool_call> form (no --tool-call-parser here).
  test('tools are accepted and rendered', async () => {
    const r = await client.chat.completions.create({
      model: 'demo', temperature: 0, max_tokens: 80,
      messages: [{ role: 'user', content: 'Bo has 5 hats and gets 1 more. How many hats?' }],
      tools: [{ type: 'function', function: { name: 'add', parameters: { type: 'object', properties: {} } } }] });
    assert.match(r.choices[0].message.content, /####|<tool_call>\n\{"name": "[a-z_]+", "arguments": \{/);
    assert.equal(r.choices[0].finish_reason, 'stop');
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

  // Structured outputs on the tool-trained demo model: a schema-constrained answer, SGLang's regex
  // extra field, forced tool calls (required and named) and the 400 for an unsupported keyword.
  test('structured outputs and forced tool calls', async () => {
    const fs = await import('node:fs');
    const path = await import('node:path');
    const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
    const tools = await startServer(['--model-path', path.join(root, 'tests/fixtures/models/demo-tools'),
                                     '--tool-call-parser', 'qwen']);
    const schema = {
      type: 'object',
      properties: {
        name: { type: 'string', maxLength: 10 },
        color: { enum: ['red', 'green', 'blue'] },
        scores: { type: 'array', items: { type: 'integer', minimum: 0, maximum: 9 }, minItems: 1, maxItems: 3 },
      },
      required: ['name', 'color', 'scores'],
      additionalProperties: false,
    };
    const r = await tools.client.chat.completions.create({
      model: 'demo', temperature: 0.7, seed: 3, max_tokens: 400,
      messages: [{ role: 'user', content: 'Describe a person as JSON.' }],
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } } });
    const value = JSON.parse(r.choices[0].message.content);
    assert.ok(['red', 'green', 'blue'].includes(value.color));
    assert.ok(typeof value.name === 'string' && value.name.length <= 10);
    assert.ok(value.scores.length >= 1 && value.scores.every((x) => Number.isInteger(x) && x >= 0 && x <= 9));
    assert.deepEqual(Object.keys(value).sort(), ['color', 'name', 'scores']);
    // SGLang's regex as an extra field of completions.
    const c = await tools.client.completions.create({ model: 'demo', prompt: 'Question: Name a color.\nAnswer:', max_tokens: 10,
                                                      temperature: 0, regex: ' (red|green|blue)' });
    assert.match(c.choices[0].text, /^ (red|green|blue)$/);
    // Forced tool calls: any of the tools, then one named function.
    const rows = fs.readFileSync(path.join(root, 'tests/fixtures/demo/tool_calls.jsonl'), 'utf8')
      .trim().split('\n').map((l) => JSON.parse(l));
    const item = rows.find((row) => row.kind === 'call');
    const messages = [...item.messages.slice(0, -1), { role: 'user', content: 'Hello there!' }];
    const required = await tools.client.chat.completions.create({
      model: 'demo', temperature: 0, max_tokens: 200, messages, tools: item.tools, tool_choice: 'required' });
    assert.equal(required.choices[0].finish_reason, 'tool_calls');
    const call = required.choices[0].message.tool_calls[0];
    assert.ok(item.tools.some((t) => t.function.name === call.function.name));
    assert.equal(typeof JSON.parse(call.function.arguments), 'object');
    const named = await tools.client.chat.completions.create({
      model: 'demo', temperature: 0, max_tokens: 200, messages, tools: item.tools,
      tool_choice: { type: 'function', function: { name: 'get_weather' } } });
    const weather = named.choices[0].message.tool_calls;
    assert.equal(weather.length, 1);
    assert.equal(weather[0].function.name, 'get_weather');
    assert.equal(typeof JSON.parse(weather[0].function.arguments).city, 'string');
    // An unsupported keyword is a 400 naming it and where it is.
    await assert.rejects(tools.client.chat.completions.create({
      model: 'demo', max_tokens: 5, messages,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'array', uniqueItems: true } } } }),
    (e) => e.status === 400 && /uniqueItems' at #/.test(e.message));
    assert.equal(await stopServer(tools.proc), 0);
  });
}
