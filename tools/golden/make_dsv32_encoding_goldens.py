#!/usr/bin/env python3
"""Records DeepSeek-V3.2's chat encoding for tests/fixtures/tokenizer/dsv32_encoding.json.

DeepSeek-V3.2 ships its prompt format as Python (encoding/encoding_dsv32.py in the model repository)
instead of a Jinja chat template. This script imports that file from the path given and records what
its encode_messages returns for the conversations below, so the C++ encoder is compared with the
reference's own output. Nothing of the reference is copied here; only inputs and outputs are kept.

    python3 tools/golden/make_dsv32_encoding_goldens.py PATH/TO/encoding_dsv32.py \
        > tests/fixtures/tokenizer/dsv32_encoding.json

Two kinds of case:
  * "encoder": messages exactly as encode_messages takes them, with thinking_mode, drop_thinking and
    add_default_bos_token. Checks tokenizer::EncodeDeepSeekV32.
  * "request": an OpenAI chat request (messages, tools, chat_template_kwargs, add_generation_prompt),
    shaped the way SGLang's serving_chat shapes a request for this encoder before calling it
    (request_to_encoder below). Checks tokenizer::DeepSeekV32Encoding::Apply, the server's renderer.
A case the reference refuses records "error" (the exception) instead of "output".
"""
import copy
import importlib.util
import json
import sys

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
# Keys in a client's order and no description: SGLang's request model dumps them in its own order.
SEARCH_TOOL = {
    "function": {
        "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "検索語"}}},
        "name": "search",
    },
    "type": "function",
}


def call(name, arguments, call_id="call_0"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def request_to_encoder(messages, tools, kwargs, add_generation_prompt):
    """SGLang's serving_chat steps before encode_messages, for a text-only request.

    Returns (messages for the encoder, thinking_mode, text appended after the encoding)."""
    shaped = []
    for m in copy.deepcopy(messages):
        content = m.get("content")
        if isinstance(content, list):  # text parts, joined with spaces
            content = " ".join(p["text"] for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text"))
        msg = {"role": m["role"], "content": "" if content is None else content}
        for key in ("reasoning_content", "tool_calls"):
            if m.get(key) is not None:
                msg[key] = m[key]
        for tc in msg.get("tool_calls") or []:
            # The original encoder reads the arguments as JSON text; SGLang also passes an object.
            if not isinstance(tc["function"]["arguments"], str):
                tc["function"]["arguments"] = json.dumps(tc["function"]["arguments"], ensure_ascii=False)
        shaped.append(msg)
    prefix = ""
    if shaped and shaped[-1]["role"] == "assistant" and isinstance(shaped[-1]["content"], str):
        if add_generation_prompt:
            shaped[-1] = {"role": "user", "content": shaped[-1]["content"]}
        else:  # continue_final_message: the assistant text follows the encoding
            prefix = shaped.pop()["content"]
    if shaped[0]["role"] != "system":
        shaped.insert(0, {"role": "system", "content": ""})
    if tools:
        # pydantic's model_dump of SGLang's Tool: type, then function's description, name,
        # parameters and strict, None when absent.
        shaped[0]["tools"] = [
            {
                "type": t.get("type", "function"),
                "function": {
                    "description": t["function"].get("description"),
                    "name": t["function"]["name"],
                    "parameters": t["function"].get("parameters"),
                    "strict": t["function"].get("strict", False),
                },
            }
            for t in tools
        ]
    thinking = "thinking" if (kwargs or {}).get("thinking", False) else "chat"
    return shaped, thinking, prefix


def request(name, messages, tools=None, kwargs=None, add_generation_prompt=True):
    return {"kind": "request", "name": name, "messages": messages, "tools": tools,
            "chat_template_kwargs": kwargs or {}, "add_generation_prompt": add_generation_prompt}


def encoder(name, messages, thinking_mode, drop_thinking=True, add_default_bos_token=True):
    return {"kind": "encoder", "name": name, "messages": messages, "thinking_mode": thinking_mode,
            "drop_thinking": drop_thinking, "add_default_bos_token": add_default_bos_token}


THINK = {"thinking": True}
ARGS = {"city": "Paris", "days": 3, "ratio": 0.5, "big": 1e20, "tiny": 1e-07, "metric": True, "none": None,
        "tags": ["a", "b"], "where": {"lat": 48.85, "名前": "巴黎"}}

CASES = [
    request("plain", [{"role": "user", "content": "Hello!"}]),
    request("plain thinking", [{"role": "user", "content": "Hello!"}], kwargs=THINK),
    request("thinking false", [{"role": "user", "content": "Hi"}], kwargs={"thinking": False}),
    request("thinking truthy non-bool", [{"role": "user", "content": "Hi"}], kwargs={"thinking": 1}),
    request("system prompt", [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "2+2?"}]),
    request("multi-turn chat", [
        {"role": "system", "content": "Be helpful."},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another?"}]),
    request("earlier reasoning is dropped", [
        {"role": "user", "content": "What is 3*4?"},
        {"role": "assistant", "content": "12", "reasoning_content": "3 times 4 is 12."},
        {"role": "user", "content": "And 5*6?"}], kwargs=THINK),
    request("earlier reasoning in chat mode", [
        {"role": "user", "content": "What is 3*4?"},
        {"role": "assistant", "content": "12", "reasoning_content": "3 times 4 is 12."},
        {"role": "user", "content": "And 5*6?"}]),
    request("tools offered", [{"role": "user", "content": "Weather in Oslo?"}], tools=[WEATHER_TOOL, SEARCH_TOOL]),
    request("tools offered thinking, system given", [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "Weather in Oslo?"}], tools=[WEATHER_TOOL], kwargs=THINK),
    request("tool call with typed arguments and result, thinking", [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "reasoning_content": "I should call the tool.",
         "tool_calls": [call("get_weather", json.dumps(ARGS))]},
        {"role": "tool", "tool_call_id": "call_0", "content": "{\"temp\": 21}"}], tools=[WEATHER_TOOL], kwargs=THINK),
    request("tool call arguments as an object, chat", [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [call("get_weather", {"city": "Paris", "days": 2})]},
        {"role": "tool", "content": "sunny"}], tools=[WEATHER_TOOL]),
    request("several consecutive tool results", [
        {"role": "user", "content": "Weather in three cities?"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("get_weather", "{\"city\": \"Rome\"}", "a"), call("get_weather", "{\"city\": \"Lima\", \"days\": 1}", "b"),
            call("search", "{\"query\": \"Kyiv weather\"}", "c")]},
        {"role": "tool", "content": "hot"}, {"role": "tool", "content": "mild"}, {"role": "tool", "content": "cold"},
        {"role": "assistant", "content": "Rome is hot, Lima mild, Kyiv cold."},
        {"role": "user", "content": "Thanks"}], tools=[WEATHER_TOOL, SEARCH_TOOL]),
    request("two tool rounds after the last user turn, thinking", [
        {"role": "user", "content": "Plan a trip."},
        {"role": "assistant", "reasoning_content": "First the weather.",
         "tool_calls": [call("get_weather", "{\"city\": \"Nice\"}")]},
        {"role": "tool", "content": "rain"},
        {"role": "assistant", "content": "", "reasoning_content": "Rain; search indoor places.",
         "tool_calls": [call("search", "{\"query\": \"musées\"}"), call("search", "{\"query\": \"cafés\"}")]},
        {"role": "tool", "content": "Musée Matisse"}, {"role": "tool", "content": "Café de Turin"}],
        tools=[WEATHER_TOOL, SEARCH_TOOL], kwargs=THINK),
    request("tool results in history before a new user turn, thinking", [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "reasoning_content": "call it", "tool_calls": [call("get_weather", "{\"city\": \"Bern\"}")]},
        {"role": "tool", "content": "snow"},
        {"role": "assistant", "content": "Snow in Bern.", "reasoning_content": "answer"},
        {"role": "user", "content": "And tomorrow?"}], tools=[WEATHER_TOOL], kwargs=THINK),
    request("unicode", [
        {"role": "system", "content": "Réponds en français. 🙂"},
        {"role": "user", "content": "東京の天気は？ Ünïcödé \u2028 tab\t end"},
        {"role": "assistant", "content": "晴れです。", "tool_calls": [call("search", "{\"query\": \"東京 天気 ☀\"}")]},
        {"role": "tool", "content": "☀ 25°C"},
        {"role": "user", "content": "ありがとう"}], tools=[SEARCH_TOOL]),
    request("text parts", [{"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]}]),
    request("developer message last, thinking", [
        {"role": "developer", "content": "Answer in JSON."}], tools=[WEATHER_TOOL], kwargs=THINK),
    request("developer before the last user turn, thinking", [
        {"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}], kwargs=THINK),
    request("developer before the last user turn, chat", [
        {"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}]),
    request("last assistant becomes a user turn", [
        {"role": "user", "content": "Start a story."}, {"role": "assistant", "content": "Once upon a time"}]),
    request("continue the final assistant message", [
        {"role": "user", "content": "Start a story."}, {"role": "assistant", "content": "Once upon a time"}],
        add_generation_prompt=False),
    request("continue the final assistant message, thinking", [
        {"role": "user", "content": "Count."}, {"role": "assistant", "content": "1, 2,"}],
        kwargs=THINK, add_generation_prompt=False),
    request("tool result without a tool call", [
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}, {"role": "tool", "content": "x"}]),
    request("more tool results than calls", [
        {"role": "user", "content": "Hi"}, {"role": "assistant", "tool_calls": [call("search", "{}")]},
        {"role": "tool", "content": "1"}, {"role": "tool", "content": "2"}], tools=[SEARCH_TOOL]),
    request("no arguments", [
        {"role": "user", "content": "Time?"}, {"role": "assistant", "tool_calls": [call("search", "{}")]},
        {"role": "tool", "content": "noon"}], tools=[SEARCH_TOOL]),
    encoder("bare user without bos", [{"role": "user", "content": "Hi"}], "chat", add_default_bos_token=False),
    encoder("system with response_format and tools", [
        {"role": "system", "content": "S", "response_format": {"type": "json_object"},
         "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
        {"role": "user", "content": "Go"}], "thinking"),
    encoder("developer with tools and response_format", [
        {"role": "developer", "content": "Do it", "tools": [WEATHER_TOOL],
         "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}}], "chat"),
    encoder("content None is printed", [
        {"role": "user", "content": None}, {"role": "assistant", "content": None}, {"role": "user"}], "chat"),
    encoder("numbers and lists as content", [
        {"role": "system", "content": ["a", 1]}, {"role": "user", "content": 2.5},
        {"role": "assistant", "content": {"k": True}}, {"role": "user", "content": 7}], "chat"),
    encoder("keep reasoning when drop_thinking is off", [
        {"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1", "reasoning_content": "R1"},
        {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "A2", "reasoning_content": "R2"}],
        "thinking", drop_thinking=False),
    encoder("assistant after the last user turn without reasoning, thinking", [
        {"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}], "thinking"),
    encoder("assistant after the last user turn without reasoning, chat", [
        {"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}], "chat"),
    encoder("no user turn, thinking", [
        {"role": "system", "content": "S"}, {"role": "assistant", "content": "A", "reasoning_content": "R"}], "thinking"),
    encoder("tool message first", [
        {"role": "tool", "content": "r"}, {"role": "assistant", "tool_calls": [call("f", "{}")]}], "chat"),
    encoder("arguments that are not an object", [
        {"role": "user", "content": "Q"}, {"role": "assistant", "tool_calls": [call("f", "[1, 2]")]}], "chat"),
    encoder("arguments that are not JSON", [
        {"role": "user", "content": "Q"}, {"role": "assistant", "tool_calls": [call("f", "{oops")]}], "chat"),
    encoder("unknown role", [{"role": "narrator", "content": "x"}], "chat"),
]


def load_reference(path):
    spec = importlib.util.spec_from_file_location("encoding_dsv32", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record(reference, case):
    out = dict(case)
    try:
        if case["kind"] == "request":
            messages, thinking_mode, prefix = request_to_encoder(
                case["messages"], case["tools"], case["chat_template_kwargs"], case["add_generation_prompt"])
            out["encoder_messages"] = messages
            out["thinking_mode"] = thinking_mode
            out["output"] = reference.encode_messages(copy.deepcopy(messages), thinking_mode=thinking_mode) + prefix
        else:
            out["output"] = reference.encode_messages(
                copy.deepcopy(case["messages"]), thinking_mode=case["thinking_mode"],
                drop_thinking=case["drop_thinking"], add_default_bos_token=case["add_default_bos_token"])
    except Exception as e:  # the reference refuses the conversation
        out.pop("output", None)
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    reference = load_reference(sys.argv[1])
    cases = [record(reference, c) for c in CASES]
    fixture = {
        "reference": "deepseek-ai/DeepSeek-V3.2 encoding/encoding_dsv32.py, encode_messages",
        "generator": "tools/golden/make_dsv32_encoding_goldens.py",
        "cases": cases,
    }
    json.dump(fixture, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
