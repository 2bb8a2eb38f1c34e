#!/usr/bin/env python3
"""Records DeepSeek-V4's chat encoding for tests/fixtures/tokenizer/dsv4_encoding.json.

DeepSeek-V4 ships its prompt format as Python (encoding/encoding_dsv4.py in the model repository)
instead of a Jinja chat template. This script imports that file from the path given and records what
its encode_messages returns for the conversations below, so the C++ encoder is compared with the
reference's own output. Nothing of the reference is copied here; only inputs and outputs are kept.

    python3 tools/golden/make_dsv4_encoding_goldens.py PATH/TO/encoding_dsv4.py \
        > tests/fixtures/tokenizer/dsv4_encoding.json

Two kinds of case, as for DeepSeek-V3.2 (make_dsv32_encoding_goldens.py):
  * "encoder": messages exactly as encode_messages takes them, with thinking_mode, drop_thinking,
    add_default_bos_token and reasoning_effort. Checks tokenizer::EncodeDeepSeekV4.
  * "request": an OpenAI chat request (messages, tools, chat_template_kwargs, add_generation_prompt),
    shaped the way SGLang's serving_chat shapes a request for this encoder before calling it
    (request_to_encoder below). Checks tokenizer::DeepSeekV4Encoding::Apply, the server's renderer.
A case the reference refuses records "error" (the exception) instead of "output".
"""
import copy
import importlib.util
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The tools, calls and argument values V3.2's recording uses, shared.
from make_dsv32_encoding_goldens import ARGS, SEARCH_TOOL, THINK, WEATHER_TOOL, call, request  # noqa: E402


def tool(content, call_id=None):
    m = {"role": "tool", "content": content}
    if call_id is not None:
        m["tool_call_id"] = call_id
    return m


def request_to_encoder(messages, tools, kwargs, add_generation_prompt):
    """SGLang's serving_chat steps before encode_messages (its "dsv4" branch), for a text-only request.

    Returns (messages for the encoder, thinking_mode, reasoning_effort, text appended after the
    encoding). The effort is read from chat_template_kwargs, where Fission's server puts the request's
    reasoning_effort (SGLang reads the request field itself)."""
    shaped = []
    for m in copy.deepcopy(messages):
        content = m.get("content")
        if isinstance(content, list):  # text parts, joined with spaces
            content = " ".join(p["text"] for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text"))
        msg = {"role": m["role"], "content": "" if content is None else content}
        for key in ("reasoning_content", "tool_calls", "tool_call_id"):
            if m.get(key) is not None:
                msg[key] = m[key]
        for tc in msg.get("tool_calls") or []:
            # The encoder reads the arguments as JSON text (anything else becomes one "arguments"
            # parameter); an object from the client is given to it as that text.
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
    kwargs = kwargs or {}
    thinking = "thinking" if kwargs.get("thinking", False) else "chat"
    # The encoder takes "max", "high" or None; SGLang drops every other value.
    effort = kwargs.get("reasoning_effort")
    effort = effort if effort in ("max", "high") else None
    return shaped, thinking, effort, prefix


def encoder(name, messages, thinking_mode, drop_thinking=True, add_default_bos_token=True, reasoning_effort=None):
    return {"kind": "encoder", "name": name, "messages": messages, "thinking_mode": thinking_mode,
            "drop_thinking": drop_thinking, "add_default_bos_token": add_default_bos_token,
            "reasoning_effort": reasoning_effort}


HI = [{"role": "user", "content": "Hi"}]

CASES = [
    request("plain", [{"role": "user", "content": "Hello!"}]),
    request("plain thinking", [{"role": "user", "content": "Hello!"}], kwargs=THINK),
    request("thinking false", HI, kwargs={"thinking": False}),
    request("thinking truthy non-bool", HI, kwargs={"thinking": 1}),
    request("effort max, thinking", HI, kwargs={"thinking": True, "reasoning_effort": "max"}),
    request("effort max, chat", HI, kwargs={"reasoning_effort": "max"}),
    request("effort high, thinking", HI, kwargs={"thinking": True, "reasoning_effort": "high"}),
    request("effort medium is dropped", HI, kwargs={"thinking": True, "reasoning_effort": "medium"}),
    request("effort not a string is dropped", HI, kwargs={"thinking": True, "reasoning_effort": 3}),
    request("effort max with a system prompt and tools", [
        {"role": "system", "content": "Be careful."}, {"role": "user", "content": "Weather in Oslo?"}],
        tools=[WEATHER_TOOL], kwargs={"thinking": True, "reasoning_effort": "max"}),
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
    request("earlier reasoning is kept when tools are offered", [
        {"role": "user", "content": "What is 3*4?"},
        {"role": "assistant", "content": "12", "reasoning_content": "3 times 4 is 12."},
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": "And 5*6?"}], tools=[SEARCH_TOOL], kwargs=THINK),
    request("tools offered", [{"role": "user", "content": "Weather in Oslo?"}], tools=[WEATHER_TOOL, SEARCH_TOOL]),
    request("tools offered thinking, system given", [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "Weather in Oslo?"}], tools=[WEATHER_TOOL], kwargs=THINK),
    request("tool call with typed arguments and result, thinking", [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "reasoning_content": "I should call the tool.",
         "tool_calls": [call("get_weather", json.dumps(ARGS))]},
        tool("{\"temp\": 21}", "call_0")], tools=[WEATHER_TOOL], kwargs=THINK),
    request("tool call arguments as an object, chat", [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [call("get_weather", {"city": "Paris", "days": 2})]},
        tool("sunny")], tools=[WEATHER_TOOL]),
    request("tool results answered out of order are sorted by call", [
        {"role": "user", "content": "Weather in three cities?"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("get_weather", "{\"city\": \"Rome\"}", "a"), call("get_weather", "{\"city\": \"Lima\", \"days\": 1}", "b"),
            call("search", "{\"query\": \"Kyiv weather\"}", "c")]},
        tool("cold", "c"), tool("hot", "a"), tool("mild", "b"),
        {"role": "assistant", "content": "Rome is hot, Lima mild, Kyiv cold."},
        {"role": "user", "content": "Thanks"}], tools=[WEATHER_TOOL, SEARCH_TOOL]),
    request("tool results with unknown ids keep their order", [
        {"role": "user", "content": "Two searches."},
        {"role": "assistant", "tool_calls": [call("search", "{\"query\": \"x\"}", "a"), call("search", "{}", "b")]},
        tool("second", "zz"), tool("first", "b"), tool("third")], tools=[SEARCH_TOOL]),
    request("two tool rounds after the last user turn, thinking", [
        {"role": "user", "content": "Plan a trip."},
        {"role": "assistant", "reasoning_content": "First the weather.",
         "tool_calls": [call("get_weather", "{\"city\": \"Nice\"}")]},
        tool("rain", "call_0"),
        {"role": "assistant", "content": "", "reasoning_content": "Rain; search indoor places.",
         "tool_calls": [call("search", "{\"query\": \"musées\"}", "s1"), call("search", "{\"query\": \"cafés\"}", "s2")]},
        tool("Musée Matisse", "s1"), tool("Café de Turin", "s2")],
        tools=[WEATHER_TOOL, SEARCH_TOOL], kwargs=THINK),
    request("tool results in history before a new user turn, thinking", [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "reasoning_content": "call it", "tool_calls": [call("get_weather", "{\"city\": \"Bern\"}")]},
        tool("snow", "call_0"),
        {"role": "assistant", "content": "Snow in Bern.", "reasoning_content": "answer"},
        {"role": "user", "content": "And tomorrow?"}], tools=[WEATHER_TOOL], kwargs=THINK),
    request("tool history without tools offered, thinking", [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "reasoning_content": "call it", "tool_calls": [call("get_weather", "{\"city\": \"Bern\"}")]},
        tool("snow", "call_0"),
        {"role": "assistant", "content": "Snow in Bern.", "reasoning_content": "answer"},
        {"role": "user", "content": "And tomorrow?"}], kwargs=THINK),
    request("a user turn right after tool results joins them", [
        {"role": "user", "content": "Search."},
        {"role": "assistant", "tool_calls": [call("search", "{\"query\": \"q\"}")]},
        tool("found", "call_0"), {"role": "user", "content": "Summarise it."}], tools=[SEARCH_TOOL], kwargs=THINK),
    request("unicode", [
        {"role": "system", "content": "Réponds en français. 🙂"},
        {"role": "user", "content": "東京の天気は？ Ünïcödé \u2028 tab\t end"},
        {"role": "assistant", "content": "晴れです。", "tool_calls": [call("search", "{\"query\": \"東京 天気 ☀\"}")]},
        tool("☀ 25°C"),
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
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}, tool("x")]),
    request("arguments that are not JSON", [
        {"role": "user", "content": "Q"}, {"role": "assistant", "tool_calls": [call("search", "{oops")]},
        tool("r")], tools=[SEARCH_TOOL]),
    request("no arguments", [
        {"role": "user", "content": "Time?"}, {"role": "assistant", "tool_calls": [call("search", "{}")]},
        tool("noon")], tools=[SEARCH_TOOL]),
    request("assistant after the last user turn without reasoning, thinking", [
        {"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}], kwargs=THINK,
        add_generation_prompt=False),
    encoder("bare user without bos", HI, "chat", add_default_bos_token=False),
    encoder("no messages", [], "thinking", reasoning_effort="max"),
    encoder("effort max at the first message only", [
        {"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2"}],
        "thinking", reasoning_effort="max"),
    encoder("system with response_format and tools", [
        {"role": "system", "content": "S", "response_format": {"type": "json_object"},
         "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
        {"role": "user", "content": "Go"}], "thinking"),
    encoder("developer with tools and response_format", [
        {"role": "developer", "content": "Do it", "tools": [WEATHER_TOOL],
         "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}}], "chat"),
    encoder("content None in system, assistant and reminder", [
        {"role": "system", "content": None}, {"role": "user", "content": "Q"}, {"role": "assistant", "content": None},
        {"role": "latest_reminder", "content": None}], "chat"),
    encoder("numbers and lists as content", [
        {"role": "system", "content": ["a", 1]}, {"role": "user", "content": "2.5"},
        {"role": "assistant", "content": {"k": True}}, {"role": "user", "content": "7"}], "chat"),
    encoder("user content None", [{"role": "user", "content": None}], "chat"),
    encoder("user content a number", [{"role": "user", "content": 7}], "chat"),
    encoder("user without content", [{"role": "user"}], "chat"),
    encoder("keep reasoning when drop_thinking is off", [
        {"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1", "reasoning_content": "R1"},
        {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "A2", "reasoning_content": "R2"}],
        "thinking", drop_thinking=False),
    encoder("no user turn, thinking", [
        {"role": "system", "content": "S"}, {"role": "assistant", "content": "A", "reasoning_content": "R"}], "thinking"),
    encoder("latest reminder after the user turn", [
        {"role": "system", "content": "S"}, {"role": "user", "content": "Q"},
        {"role": "latest_reminder", "content": "Today is Monday."}, {"role": "assistant", "content": "A"}], "thinking"),
    encoder("unknown roles before the last user turn are dropped in thinking mode", [
        {"role": "narrator", "content": "x"}, {"role": "developer", "content": "d"},
        {"role": "user", "content": "Q"}], "thinking"),
    encoder("search results are kept before the last user turn, and not rendered", [
        {"role": "direct_search_results", "content": "r"}, {"role": "user", "content": "Q"}], "thinking"),
    encoder("action task, chat", [
        {"role": "system", "content": "S"}, {"role": "user", "content": "Book a table.", "task": "action"}], "chat"),
    encoder("action task, thinking", [{"role": "user", "content": "Book a table.", "task": "action"}], "thinking"),
    encoder("title task and its answer", [
        {"role": "user", "content": "Hello there", "task": "title"}, {"role": "assistant", "content": "Greeting"},
        {"role": "user", "content": "Next"}], "thinking", drop_thinking=False),
    encoder("task on a message that is not last", [
        {"role": "user", "content": "A", "task": "query"}, {"role": "user", "content": "B"}], "chat"),
    encoder("invalid task", [{"role": "user", "content": "Q", "task": "summary"}], "chat"),
    encoder("assistant without eos", [
        {"role": "user", "content": "Q"}, {"role": "assistant", "content": "partial", "wo_eos": True}], "thinking"),
    encoder("tool content as parts", [
        {"role": "user", "content": "Q"}, {"role": "assistant", "tool_calls": [call("f", "{}")]},
        {"role": "tool", "tool_call_id": "call_0", "content": [
            {"type": "text", "text": "one"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "two"}]}],
        "chat"),
    encoder("tool content None and missing", [
        {"role": "user", "content": "Q"}, {"role": "assistant", "tool_calls": [call("f", "{}", "a"), call("f", "{}", "b")]},
        {"role": "tool", "content": None, "tool_call_id": "b"}, {"role": "tool", "tool_call_id": "a"}], "chat"),
    encoder("tool call ids under function", [
        {"role": "user", "content": "Q"},
        {"role": "assistant", "tool_calls": [
            {"type": "function", "function": {"id": "x", "name": "f", "arguments": "{}"}},
            {"type": "function", "function": {"id": "y", "name": "g", "arguments": "{}"}}]},
        {"role": "tool", "content": "for g", "tool_call_id": "y"}, {"role": "tool", "content": "for f", "tool_call_id": "x"}],
        "chat"),
    encoder("tool message first", [
        {"role": "tool", "content": "r"}, {"role": "assistant", "tool_calls": [call("f", "{}")]}], "chat"),
    encoder("arguments as an object", [
        {"role": "user", "content": "Q"}, {"role": "assistant", "tool_calls": [call("f", {"a": 1})]}], "chat"),
    encoder("arguments that are not an object", [
        {"role": "user", "content": "Q"}, {"role": "assistant", "tool_calls": [call("f", "[1, 2]")]}], "chat"),
    encoder("arguments that are a JSON string", [
        {"role": "user", "content": "Q"}, {"role": "assistant", "tool_calls": [call("f", "\"text\"")]}], "chat"),
    encoder("a tool call without arguments", [
        {"role": "user", "content": "Q"}, {"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}], "chat"),
    encoder("a tool without function", [{"role": "system", "content": "S", "tools": [{"type": "function"}]}], "chat"),
    encoder("developer without content", [{"role": "developer", "content": ""}], "chat"),
    encoder("developer content not text", [{"role": "developer", "content": 5}], "chat"),
    encoder("invalid reasoning effort", HI, "thinking", reasoning_effort="low"),
    encoder("invalid reasoning effort in chat mode", HI, "chat", reasoning_effort="medium"),
    encoder("unknown role", [{"role": "narrator", "content": "x"}], "chat"),
    encoder("no role", [{"content": "x"}], "chat"),
]


def load_reference(path):
    spec = importlib.util.spec_from_file_location("encoding_dsv4", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record(reference, case):
    out = dict(case)
    try:
        if case["kind"] == "request":
            messages, thinking_mode, effort, prefix = request_to_encoder(
                case["messages"], case["tools"], case["chat_template_kwargs"], case["add_generation_prompt"])
            out["encoder_messages"] = messages
            out["thinking_mode"] = thinking_mode
            out["reasoning_effort"] = effort
            out["output"] = reference.encode_messages(
                copy.deepcopy(messages), thinking_mode=thinking_mode, reasoning_effort=effort) + prefix
        else:
            out["output"] = reference.encode_messages(
                copy.deepcopy(case["messages"]), thinking_mode=case["thinking_mode"],
                drop_thinking=case["drop_thinking"], add_default_bos_token=case["add_default_bos_token"],
                reasoning_effort=case["reasoning_effort"])
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
        "reference": "deepseek-ai/DeepSeek-V4-Flash encoding/encoding_dsv4.py, encode_messages",
        "generator": "tools/golden/make_dsv4_encoding_goldens.py",
        "cases": cases,
    }
    json.dump(fixture, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
