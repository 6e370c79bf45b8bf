"""Training data as people have it: rows written from the documented shape of public data sets and
APIs, one file per format, each with what prepare_data must do with every row.

The oracle is independent of the normaliser: each kept row names, in order, the assistant text
that must be supervised (``train``: one entry per supervised assistant turn, each a list of
substrings that must all be inside that turn's supervised tokens), the text that must be in the
input but never supervised (``context``) and text that must not be in the input at all
(``absent``), or names the skip reason the report must count. Each row's first user text holds
a tag ``(case:NAME:K)`` so output rows can be told apart by their decoded text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculators_qwen_compat.demo.sample_data import WEATHER_TOOL

NOTHING = "nothing to supervise (no assistant turn after a user turn, or none inside --seq-length)"
WEIGHT_ZERO = "nothing to supervise: every assistant turn has weight 0"

OPENAI_WEATHER = WEATHER_TOOL
WEATHER = WEATHER_TOOL["function"]
CLOCK = {
    "name": "get_time",
    "description": "The time now",
    "parameters": {"type": "object", "properties": {}},
}


@dataclass
class Kept:
    train: list[list[str]]
    context: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    once: list[str] = field(default_factory=list)  # in the input exactly once


@dataclass
class Skip:
    reason: str


@dataclass
class Format:
    name: str
    source: str  # where the shape is documented
    rows: list[dict[str, Any]]
    expect: list[Kept | Skip]
    array: bool = False  # written as one JSON array (.json) instead of JSON lines


def tag(name: str, k: int = 0) -> str:
    return f"(case:{name}:{k})"


def _u(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _a(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **extra}


def _h(text: str) -> dict[str, str]:
    return {"from": "human", "value": text}


def _g(text: str, **extra: Any) -> dict[str, Any]:
    return {"from": "gpt", "value": text, **extra}


def _call(name: str, arguments: str, call_id: str = "call_1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def formats(renders: bool) -> list[Format]:
    """Every format; ``renders``: speculators 0.8+ (unknown roles become assistant turns)."""
    f: list[Format] = []

    def add(name: str, source: str, rows: list, expect: list, array: bool = False) -> None:
        f.append(Format(name, source, rows, expect, array))

    n = "sharegpt_vicuna"
    add(
        n,
        "ShareGPT/Vicuna: FastChat docs/dataset_release.md (id, conversations from/value)",
        [
            {
                "id": "x1",
                "conversations": [
                    _h(f"{tag(n)} Name a colour."),
                    _g("Teal is a colour."),
                    _h("Another?"),
                    _g("Ochre works too."),
                ],
            },
        ],
        [Kept([["Teal is a colour."], ["Ochre works too."]])],
    )

    n = "openai_chat"
    add(
        n,
        "OpenAI fine-tuning guide, chat format (messages with system/user/assistant)",
        [
            {
                "messages": [
                    {"role": "system", "content": "You are terse."},
                    _u(f"{tag(n)} Capital of Peru?"),
                    _a("Lima is the capital."),
                ]
            },
        ],
        [Kept([["Lima is the capital."]], context=["You are terse."])],
    )

    n = "openai_weight"
    add(
        n,
        "OpenAI fine-tuning guide, multi-turn chat examples: weight 0/1 on assistant messages",
        [
            {
                "messages": [
                    _u(f"{tag(n)} Capital of France?"),
                    _a("Paris, as far as I recall maybe.", weight=0),
                    _u("Can you be more accurate?"),
                    _a("Paris is the capital of France.", weight=1),
                ]
            },
        ],
        [Kept([["Paris is the capital of France."]], context=["as far as I recall maybe"])],
    )

    n = "openai_weight_all_zero"
    add(
        n,
        "OpenAI fine-tuning guide (weight 0 on every assistant message)",
        [
            {"messages": [_u(f"{tag(n)} Hi"), _a("Hello there, friend.", weight=0)]},
        ],
        [Skip(WEIGHT_ZERO)],
    )

    n = "slimorca_float_weights"
    add(
        n,
        "Open-Orca/SlimOrca card: conversations from/value with weight null (context) or 1.0",
        [
            {
                "conversations": [
                    {"from": "system", "value": "You are an AI assistant.", "weight": None},
                    {"from": "human", "value": f"{tag(n)} Summarise: the cat sat.", "weight": 0.0},
                    {"from": "gpt", "value": "A cat was sitting.", "weight": 1.0},
                ]
            },
            {
                "conversations": [
                    _h(f"{tag(n, 1)} Count to two."),
                    _g("One, two, maybe three.", weight=0.0),
                    _h("Exactly two please."),
                    _g("One, two.", weight=0.5),
                ]
            },
        ],
        [Kept([["A cat was sitting."]]), Kept([["One, two."]], context=["maybe three"])],
    )

    n = "openhermes_null_weights"
    add(
        n,
        "teknium/OpenHermes-2.5 card: conversations with weight null on every turn",
        [
            {
                "conversations": [
                    {"from": "system", "value": "Be helpful.", "weight": None},
                    {"from": "human", "value": f"{tag(n)} 7 times 6?", "weight": None},
                    {"from": "gpt", "value": "7 times 6 is 42.", "weight": None},
                ],
                "source": "airoboros2.2",
                "category": "orca",
            },
        ],
        [Kept([["7 times 6 is 42."]])],
    )

    n = "axolotl_train_false"
    add(
        n,
        "axolotl docs, chat_template datasets: per-message training field (train: false)",
        [
            {
                "messages": [
                    _u(f"{tag(n)} Translate 'gato'."),
                    _a("It means dog, I think.", train=False),
                    _u("Sure?"),
                    _a("Gato means cat.", train=True),
                ]
            },
        ],
        [Kept([["Gato means cat."]], context=["It means dog"])],
    )

    n = "lmsys_chat_1m"
    add(
        n,
        "lmsys/lmsys-chat-1m card: conversation_id, model, conversation [{content, role}]",
        [
            {
                "conversation_id": "c9",
                "model": "vicuna-13b",
                "turn": 1,
                "language": "English",
                "openai_moderation": [],
                "redacted": False,
                "conversation": [
                    {"content": f"{tag(n)} Write a haiku on rain.", "role": "user"},
                    {"content": "Soft rain on the roof.", "role": "assistant"},
                ],
            },
        ],
        [Kept([["Soft rain on the roof."]])],
    )

    n = "wildchat"
    add(
        n,
        "allenai/WildChat-1M card: conversation turns with language, toxic, redacted, ...",
        [
            {
                "conversation_hash": "h",
                "model": "gpt-4-0314",
                "timestamp": "2023-04-09",
                "turn": 1,
                "conversation": [
                    {
                        "content": f"{tag(n)} Define entropy.",
                        "role": "user",
                        "language": "English",
                        "toxic": False,
                        "redacted": False,
                        "turn_identifier": 1,
                    },
                    {
                        "content": "Entropy measures disorder.",
                        "role": "assistant",
                        "language": "English",
                        "toxic": False,
                        "redacted": False,
                        "turn_identifier": 1,
                    },
                ],
            },
        ],
        [Kept([["Entropy measures disorder."]])],
    )

    n = "messages_json_string"
    add(
        n,
        "CSV/Parquet exports that serialise the messages list as one JSON string",
        [
            {"messages": json.dumps([_u(f"{tag(n)} Largest planet?"), _a("Jupiter is largest.")])},
        ],
        [Kept([["Jupiter is largest."]])],
    )

    n = "turns_other_column"
    add(
        n,
        "any column holding role/content turns (here 'dialog'), found row by row",
        [
            {"dialog": [_u(f"{tag(n)} Opposite of hot?"), _a("Cold is the opposite.")], "id": 3},
        ],
        [Kept([["Cold is the opposite."]])],
    )

    n = "ultrachat_200k"
    add(
        n,
        "HuggingFaceH4/ultrachat_200k card: prompt, prompt_id, messages",
        [
            {
                "prompt": "Tips for sleep?",
                "prompt_id": "abc",
                "messages": [_u(f"{tag(n)} Tips for sleep?"), _a("Keep a regular schedule.")],
            },
        ],
        [Kept([["Keep a regular schedule."]])],
    )

    n = "alpaca"
    add(
        n,
        "tatsu-lab/alpaca card / alpaca_data.json: a JSON array of instruction, input, output",
        [
            {
                "instruction": f"{tag(n)} Classify the sentiment.",
                "input": "I love it.",
                "output": "The sentiment is positive.",
            },
            {
                "instruction": f"{tag(n, 1)} Name a prime number.",
                "input": "",
                "output": "Seven is prime.",
            },
        ],
        [
            Kept([["The sentiment is positive."]], context=["I love it."]),
            Kept([["Seven is prime."]]),
        ],
        array=True,
    )

    n = "openai_tool_calls"
    add(
        n,
        "OpenAI function-calling fine-tuning docs: tools objects, arguments as a JSON string",
        [
            {
                "tools": [OPENAI_WEATHER],
                "messages": [
                    _u(f"{tag(n)} Weather in Oslo?"),
                    _a("", tool_calls=[_call("get_weather", '{"city": "Oslo"}')]),
                    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 4}'},
                    _a("It is 4 degrees in Oslo."),
                ],
            },
        ],
        [Kept([["get_weather", "Oslo"], ["It is 4 degrees in Oslo."]], context=['"temp": 4'])],
    )

    n = "hermes_tools_json_string"
    add(
        n,
        "NousResearch/hermes-function-calling-v1 card: conversations + tools as a JSON string",
        [
            {
                "tools": json.dumps([OPENAI_WEATHER]),
                "conversations": [
                    {"from": "system", "value": "You may call functions."},
                    _h(f"{tag(n)} Weather in Rome?"),
                    {
                        "from": "gpt",
                        "value": "",
                        "tool_calls": [_call("get_weather", '{"city": "Rome"}')],
                    },
                    {"from": "tool", "value": '{"temp": 19}', "tool_call_id": "call_1"},
                    _g("Rome is at 19 degrees."),
                ],
            }
        ],
        [Kept([["get_weather", "Rome"], ["Rome is at 19 degrees."]])],
    )

    n = "tools_list_of_json_strings"
    add(
        n,
        "agent-trajectory sets storing tools as a list of JSON strings (issue 11)",
        [
            {
                "tools": [
                    json.dumps(OPENAI_WEATHER),
                    json.dumps({"type": "function", "function": CLOCK}),
                ],
                "messages": [
                    _u(f"{tag(n)} Weather in Lagos?"),
                    _a("", tool_calls=[_call("get_weather", '{"city": "Lagos"}')]),
                    {"role": "tool", "tool_call_id": "call_1", "content": "31C"},
                    _a("Lagos is hot: 31C."),
                ],
            },
        ],
        [Kept([["get_weather", "Lagos"], ["Lagos is hot: 31C."]])],
    )

    n = "tools_bare_schemas"
    add(
        n,
        "OpenAI API reference, function objects (name, description, parameters) unwrapped",
        [
            {
                "tools": [WEATHER],
                "messages": [
                    _u(f"{tag(n)} Weather in Quito?"),
                    _a("", tool_calls=[_call("get_weather", '{"city": "Quito"}')]),
                    {"role": "tool", "tool_call_id": "call_1", "content": "15C"},
                    _a("Quito: 15C and mild."),
                ],
            },
        ],
        [Kept([["get_weather", "Quito"], ["Quito: 15C and mild."]])],
    )

    n = "openai_legacy_functions"
    add(
        n,
        "OpenAI legacy function calling (functions, function_call, role function)",
        [
            {
                "functions": [WEATHER],
                "messages": [
                    _u(f"{tag(n)} Weather in Cairo?"),
                    {
                        "role": "assistant",
                        "content": None,
                        "function_call": {"name": "get_weather", "arguments": '{"city": "Cairo"}'},
                    },
                    {"role": "function", "name": "get_weather", "content": "35C"},
                    _a("Cairo is at 35C."),
                ],
            },
        ],
        [Kept([["get_weather", "Cairo"], ["Cairo is at 35C."]])],
    )

    n = "llamafactory_sharegpt_tools"
    add(
        n,
        "LLaMA-Factory data/README.md, sharegpt: function_call/observation, system, tools",
        [
            {
                "conversations": [
                    _h(f"{tag(n)} Weather in Hanoi?"),
                    {
                        "from": "function_call",
                        "value": '{"name": "get_weather", "arguments": {"city": "Hanoi"}}',
                    },
                    {"from": "observation", "value": "28C"},
                    _g("Hanoi has 28C."),
                ],
                "system": "You are a weather bot.",
                "tools": json.dumps([WEATHER]),
            }
        ],
        [Kept([["get_weather", "Hanoi"], ["Hanoi has 28C."]], context=["weather bot"])],
    )

    n = "llamafactory_mixed_case_roles"
    add(
        n,
        "LLaMA-Factory sharegpt with capitalised role tags (Function_Call, Observation)",
        [
            {
                "conversations": [
                    {"from": "Human", "value": f"{tag(n)} Weather in Lima?"},
                    {
                        "from": "Function_Call",
                        "value": '{"name": "get_weather", "arguments": {"city": "Lima"}}',
                    },
                    {"from": "Observation", "value": "18C"},
                    {"from": "GPT", "value": "Lima: 18C."},
                ],
                "tools": json.dumps([WEATHER]),
            },
        ],
        [Kept([["get_weather", "Lima"], ["Lima: 18C."]], absent=['"arguments": {"city"'])],
    )

    n = "toolace_system_column"
    add(
        n,
        "Team-ACE/ToolACE card: top-level system column, conversations from user/assistant",
        [
            {
                "system": "You can use tools. Answer briefly.",
                "conversations": [
                    {"from": "user", "value": f"{tag(n)} What is 2+3?"},
                    {"from": "assistant", "value": "2+3 equals 5."},
                ],
            }
        ],
        [Kept([["2+3 equals 5."]], context=["Answer briefly."])],
    )

    n = "anthropic_blocks"
    add(
        n,
        "Anthropic Messages API docs: system, content blocks text/thinking/tool_use/tool_result",
        [
            {
                "system": "You check the weather.",
                "tools": [
                    {
                        "name": "get_weather",
                        "description": "Current weather",
                        "input_schema": WEATHER["parameters"],
                    }
                ],
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": f"{tag(n)} Weather in Bern?"}],
                    },
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "thinking", "thinking": "Need the tool.", "signature": "sig"},
                            {
                                "type": "tool_use",
                                "id": "toolu_1",
                                "name": "get_weather",
                                "input": {"city": "Bern"},
                            },
                        ],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "9C"}
                        ],
                    },
                    {"role": "assistant", "content": [{"type": "text", "text": "Bern is at 9C."}]},
                ],
            }
        ],
        [Kept([["get_weather", "Bern"], ["Bern is at 9C."]], context=["check the weather"])],
    )

    n = "anthropic_result_list_and_text"
    add(
        n,
        "Anthropic Messages API docs: tool_result with a list of text blocks, then user text",
        [
            {
                "messages": [
                    {"role": "user", "content": f"{tag(n)} Time in Tokyo?"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "Checking the clock."},
                            {"type": "tool_use", "id": "toolu_9", "name": "get_time", "input": {}},
                        ],
                    },
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "toolu_9",
                                "content": [{"type": "text", "text": "21:04"}],
                            },
                            {"type": "text", "text": "Also say it in words."},
                        ],
                    },
                    {"role": "assistant", "content": "Four minutes past nine in the evening."},
                ],
                "tools": [
                    {
                        "name": "get_time",
                        "description": "The time now",
                        "input_schema": {"type": "object", "properties": {}},
                    }
                ],
            }
        ],
        [
            Kept(
                [["Checking the clock.", "get_time"], ["Four minutes past nine"]],
                context=["21:04", "Also say it in words."],
            )
        ],
    )

    n = "reasoning_inline_and_field"
    add(
        n,
        "vLLM reasoning outputs (reasoning_content) beside R1-style inline <think> content",
        [
            {
                "messages": [
                    _u(f"{tag(n)} Is 17 prime?"),
                    _a(
                        "<think>Check divisors up to 4.</think>Yes, 17 is prime.",
                        reasoning_content="Check divisors up to 4.",
                    ),
                ]
            },
        ],
        [Kept([["Yes, 17 is prime."]], once=["Check divisors up to 4."])],
    )

    n = "openrouter_reasoning"
    add(
        n,
        "OpenRouter chat API docs: assistant message 'reasoning' field",
        [
            {
                "messages": [
                    _u(f"{tag(n)} Is 21 prime?"),
                    _a("No, 21 is 3 times 7.", reasoning="Try dividing by 3."),
                ]
            },
        ],
        [Kept([["No, 21 is 3 times 7."]], once=["Try dividing by 3."])],
    )

    n = "openai_content_parts"
    add(
        n,
        "OpenAI chat API docs: content as a list of text parts",
        [
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": f"{tag(n)} Hi,"},
                            {"type": "text", "text": "say hello."},
                        ],
                    },
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "Hello!"},
                            {"type": "text", "text": "Nice day."},
                        ],
                    },
                ]
            },
        ],
        [Kept([["Hello!", "Nice day."]])],
    )

    n = "openai_developer_role"
    add(
        n,
        "OpenAI chat API docs: developer messages (o1 and newer)",
        [
            {
                "messages": [
                    {"role": "developer", "content": "Answer in French."},
                    _u(f"{tag(n)} Thank you"),
                    _a("Merci beaucoup."),
                ]
            },
        ],
        [Kept([["Merci beaucoup."]], context=["Answer in French."])],
    )

    n = "openai_name_fields"
    add(
        n,
        "OpenAI chat API docs: optional name on system and user messages",
        [
            {
                "messages": [
                    {"role": "system", "name": "ops", "content": "Be exact."},
                    {"role": "user", "name": "alice", "content": f"{tag(n)} 10/4?"},
                    _a("10/4 is 2.5."),
                ]
            },
        ],
        [Kept([["10/4 is 2.5."]])],
    )

    n = "on_policy_model_roles"
    add(
        n,
        "on-policy data naming the generating model as the role (speculators 0.9 comment)",
        [
            {
                "messages": [
                    _u(f"{tag(n)} First question?"),
                    {"role": "Qwen3-32B", "content": "First answer from the model."},
                    _u("Second question?"),
                    _a("Second answer."),
                ]
            },
        ],
        [
            Kept([["First answer from the model."], ["Second answer."]])
            if renders
            else Kept([["Second answer."]], absent=["First answer from the model."])
        ],
    )

    n = "tool_call_without_arguments"
    add(
        n,
        "OpenAI function calling: a call to a function with no parameters, arguments omitted",
        [
            {
                "tools": [{"type": "function", "function": CLOCK}],
                "messages": [
                    _u(f"{tag(n)} What time is it?"),
                    _a(
                        "",
                        tool_calls=[
                            {"id": "c7", "type": "function", "function": {"name": "get_time"}}
                        ],
                    ),
                    {"role": "tool", "tool_call_id": "c7", "content": "10:30"},
                    _a("It is 10:30."),
                ],
            },
            {
                "tools": [OPENAI_WEATHER],
                "messages": [
                    _u(f"{tag(n, 1)} Weather?"),
                    _a(
                        "",
                        tool_calls=[
                            {"id": "c8", "type": "function", "function": {"name": "get_weather"}}
                        ],
                    ),
                ],
            },
        ],
        [Kept([["get_time"], ["It is 10:30."]]), Skip("tool call 'get_weather' without arguments")],
    )

    n = "mixed_sharegpt_openai"
    add(
        n,
        "a file mixing ShareGPT and OpenAI rows (issue 11: files mixing them)",
        [
            {"conversations": [_h(f"{tag(n)} Square root of 81?"), _g("It is 9.")]},
            {"messages": [_u(f"{tag(n, 1)} Square root of 64?"), _a("That is 8.")]},
        ],
        [Kept([["It is 9."]]), Kept([["That is 8."]])],
    )

    n = "sharegpt_json_array"
    add(
        n,
        "ShareGPT as one JSON array file (ShareGPT_V3_unfiltered_cleaned_split.json)",
        [
            {
                "id": "s1",
                "conversations": [
                    _h(f"{tag(n)} Boiling point of water?"),
                    _g("100 degrees Celsius at sea level."),
                ],
            },
        ],
        [Kept([["100 degrees Celsius at sea level."]])],
        array=True,
    )
    return f


#: Files where the data-quality checks must fire, with the warning kinds they must raise.
def quality_files() -> dict[str, tuple[list[dict[str, Any]], set[str]]]:
    def conv(k: int, prompt: str, reply: str | None) -> dict[str, Any]:
        turns = [_u(f"(q:{k}) {prompt}")] + ([_a(reply)] if reply is not None else [])
        return {"messages": turns}

    topics = ["tides", "volcanoes", "owls", "glaciers", "comets", "coral", "bees", "deserts"]
    return {
        # the seed user's trick: every reply "OK." to get past the template
        "placeholder_ok": (
            [conv(i, f"Explain {t}.", "OK.") for i, t in enumerate(topics)],
            {"placeholder_replies", "boilerplate_replies"},
        ),
        # one long placeholder text repeated in every row
        "placeholder_repeated": (
            [
                conv(
                    10 + i, f"Describe {t}.", "This response will be generated later by the model."
                )
                for i, t in enumerate(topics)
            ],
            {"placeholder_replies"},
        ),
        "boilerplate_mix": (
            [
                conv(20, "Explain tides.", "Sure."),
                conv(21, "Explain owls.", "Okay!"),
                conv(22, "Explain bees.", "Got it."),
                conv(23, "Explain comets.", "Done."),
                conv(24, "Explain coral.", "Coral reefs are built by colonies of polyps."),
                conv(25, "Explain deserts.", "Deserts get less than 250 mm of rain a year."),
            ],
            {"boilerplate_replies"},
        ),
        "prompt_only": (
            [conv(30 + i, f"Tell me about {t}.", None) for i, t in enumerate(topics[:4])]
            + [
                conv(35, "Tell me about owls at night.", "Owls hunt at night using hearing."),
                conv(36, "Tell me about bees in winter.", "Bees cluster to keep warm."),
            ],
            {"prompt_only_rows"},
        ),
        "duplicates": (
            [conv(40, "Why is the sky blue?", "Rayleigh scattering of sunlight.")] * 3
            + [conv(41, "Why is grass green?", "Chlorophyll reflects green light.")],
            {"duplicate_conversations"},
        ),
    }


def write_format(folder: Path, fmt: Format) -> Path:
    if fmt.array:
        path = folder / f"{fmt.name}.json"
        path.write_text(json.dumps(fmt.rows, ensure_ascii=False, indent=1), "utf-8")
    else:
        path = folder / f"{fmt.name}.jsonl"
        path.write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in fmt.rows), "utf-8"
        )
    return path
