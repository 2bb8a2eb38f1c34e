#!/usr/bin/env python3
"""Writes the committed chat conversations (tests/fixtures/tokenizer/chat_conversations.json).

Each conversation is rendered with every model's chat template by make_tokenizer_goldens.py. They
cover system prompts, multi-turn chats, tool definitions, tool calls (arguments as JSON text and as
objects), tool results, reasoning content, add_generation_prompt on and off and the `enable_thinking`
switch. Deterministic.

Usage: make_tokenizer_conversations.py OUT_FILE
"""
import itertools
import json
import sys

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
CALC_TOOL = {
    "type": "function",
    "function": {
        "name": "calculate",
        "description": "Evaluate an arithmetic expression: «exact» results, ünïcode ok.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}, "precision": {"type": "integer", "default": 2},
                           "ratio": {"type": "number", "minimum": 0.5, "maximum": 1e-05}},
            "required": ["expression"],
        },
    },
}

USER_TEXTS = [
    "Hello!", "What is 2 + 2?", "Write a haiku about the sea.", "你好，请介绍一下你自己。",
    "Explain recursion in one sentence.\nThen give an example.", "  spaces around  ",
    "Janet's ducks lay 16 eggs per day. How many dozen is that in a week?",
    "Translate to French: 'The cat is on the table.'", "emoji test 😀👍🏽", "Tabs\tand\nnewlines\n\n",
]
ASSISTANT_TEXTS = [
    "Hi! How can I help you today?", "2 + 2 = 4.", "Waves fold on the shore\nsalt wind carries gull voices\nthe tide keeps its time",
    "我是一个人工智能助手。", "Recursion is when a function calls itself.", "Sure.",
    "Each day 16 eggs, so 112 a week, which is 9 dozen and 4 eggs.", "Le chat est sur la table.",
]
SYSTEMS = ["You are a helpful assistant.", "You are a terse assistant. Answer in one word.",
           "Système: réponds en français.\nSois bref."]


def tool_call(name, args, as_text):
    return {"type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False) if as_text else args}}


def main():
    convs = []

    def add(name, messages, tools=None, agp=False, **kwargs):
        convs.append({"name": name, "messages": messages, "tools": tools, "add_generation_prompt": agp,
                      "kwargs": kwargs})

    # Single and multi-turn chats, with and without system prompts and generation prompts.
    for i, (sys_i, agp, turns) in enumerate(itertools.product([None, 0, 1, 2], [True, False], [1, 2, 3])):
        msgs = [] if sys_i is None else [{"role": "system", "content": SYSTEMS[sys_i]}]
        for t in range(turns):
            msgs.append({"role": "user", "content": USER_TEXTS[(i + t) % len(USER_TEXTS)]})
            if t + 1 < turns or not agp:
                msgs.append({"role": "assistant", "content": ASSISTANT_TEXTS[(i + t) % len(ASSISTANT_TEXTS)]})
        add(f"chat_{i}", msgs, agp=agp)
    for j, text in enumerate(USER_TEXTS):
        add(f"single_user_{j}", [{"role": "user", "content": text}], agp=True)
    # Thinking switch (templates without it ignore the keyword).
    for think in [True, False]:
        for agp in [True, False]:
            msgs = [{"role": "user", "content": "Is 97 prime?"}]
            if not agp:
                msgs.append({"role": "assistant", "content": "Yes, 97 is prime."})
            add(f"thinking_{think}_{agp}", msgs, agp=agp, enable_thinking=think, thinking=think)
    # Reasoning in assistant turns: inline <think> blocks and a reasoning_content field.
    add("reasoning_inline", [
        {"role": "user", "content": "What is 3 * 7?"},
        {"role": "assistant", "content": "<think>\n3 times 7 is 21.\n</think>\n\n21"},
        {"role": "user", "content": "And 21 + 1?"},
        {"role": "assistant", "content": "<think>\nadd one\n</think>\n\n22"}], agp=False)
    add("reasoning_field", [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris.", "reasoning_content": "The capital of France is Paris."},
        {"role": "user", "content": "Of Italy?"}], agp=True)
    add("reasoning_history", [
        {"role": "system", "content": SYSTEMS[0]},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>greet back</think>Hello!"},
        {"role": "user", "content": "Bye"}], agp=True, enable_thinking=False)
    # Tools: definitions, calls with JSON-text and object arguments, results, several calls.
    for k, as_text in enumerate([True, False]):
        for agp in [True, False]:
            tools = [WEATHER_TOOL, CALC_TOOL]
            msgs = [{"role": "system", "content": SYSTEMS[0]},
                    {"role": "user", "content": "Weather in Paris and Tokyo? Also 12*(3+4)."},
                    {"role": "assistant", "content": None if as_text else "", "tool_calls": [
                        tool_call("get_weather", {"city": "Paris"}, as_text),
                        tool_call("get_weather", {"city": "東京", "unit": "celsius"}, as_text),
                        tool_call("calculate", {"expression": "12*(3+4)", "precision": 0}, as_text)]},
                    {"role": "tool", "content": "{\"temp\": 18, \"sky\": \"cloudy\"}"},
                    {"role": "tool", "content": "{\"temp\": 22, \"sky\": \"clear\"}"},
                    {"role": "tool", "content": "84"}]
            if not agp:
                msgs.append({"role": "assistant", "content": "Paris 18°C cloudy, Tokyo 22°C clear; 12*(3+4) = 84."})
            add(f"tools_multi_{k}_{agp}", msgs, tools=tools, agp=agp)
    for k, as_text in enumerate([True, False]):
        msgs = [{"role": "user", "content": "What's the weather in Berlin?"},
                {"role": "assistant", "content": None if as_text else "", "tool_calls": [
                    tool_call("get_weather", {"city": "Berlin"}, as_text)]},
                {"role": "tool", "content": "sunny, 25"},
                {"role": "assistant", "content": "It is sunny and 25 degrees in Berlin."},
                {"role": "user", "content": "Thanks! And Rome?"}]
        add(f"tools_single_{k}", msgs, tools=[WEATHER_TOOL], agp=True)
        add(f"tools_defs_only_{k}", [{"role": "user", "content": "Hi there"}],
            tools=[WEATHER_TOOL] if k == 0 else [WEATHER_TOOL, CALC_TOOL], agp=bool(k))
        add(f"tools_defs_system_{k}", [{"role": "system", "content": SYSTEMS[k]},
                                       {"role": "user", "content": "Compute 1/3"}],
            tools=[CALC_TOOL], agp=True)
    add("tool_then_followup", [
        {"role": "user", "content": "Calc 2^8"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("calculate", {"expression": "2^8"}, True)]},
        {"role": "tool", "content": "256"}], tools=[CALC_TOOL], agp=True)
    add("tool_result_no_agp", [
        {"role": "user", "content": "Calc 3^3"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("calculate", {"expression": "3^3"}, True)]},
        {"role": "tool", "content": "27"}], tools=[CALC_TOOL], agp=False)
    add("tool_response_user_text", [
        {"role": "user", "content": "<tool_response>\nx\n</tool_response>"},
        {"role": "assistant", "content": "ok"}], agp=True)
    # Several system messages, special-token text in content, empty content.
    add("two_systems", [{"role": "system", "content": "First rule."}, {"role": "system", "content": "Second rule."},
                        {"role": "user", "content": "Go"}], agp=True)
    add("special_text_in_content", [{"role": "user", "content": "Say <|im_end|> and <｜end▁of▁sentence｜> literally"}],
        agp=True)
    add("empty_user", [{"role": "user", "content": ""}], agp=True)
    add("empty_assistant", [{"role": "user", "content": "Say nothing"}, {"role": "assistant", "content": ""}])
    add("long_multi_turn", [m for t in range(6) for m in (
        {"role": "user", "content": USER_TEXTS[t]}, {"role": "assistant", "content": ASSISTANT_TEXTS[t]})], agp=False)
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(convs, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(convs)} conversations to {sys.argv[1]}")


if __name__ == "__main__":
    main()
