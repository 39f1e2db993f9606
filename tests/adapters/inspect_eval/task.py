"""The inspect_ai task the hooks' tests run (`inspect eval task.py`, a copy of this file).

Its samples are `INSPECT_TEST_SAMPLES` (ids, comma-separated: a letter, then a
number N, maybe after a space, which the identifier rule does not allow); it asks
"sample N", and its model answers "ok" with usage that names it: 1000 + N uncached
input tokens from mockllm (preset outputs carrying their usage: no tokenizer is
loaded), 2000 + N from the OpenAI stub (`stub.py`). With `INSPECT_TEST_GATE` set,
mockllm's answer waits until that file exists: the test holds a sample's slot open.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessage, GenerateConfig, Model, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate
from inspect_ai.tool import ToolChoice, ToolInfo

MOCK_INPUT_BASE = 1000
STUB_INPUT_BASE = 2000
MOCK_CACHED = 5
GATE_POLL_S = 0.05


def number_of(text: str) -> int:
    return int(text.split()[-1])


async def mock_output(
    messages: list[ChatMessage], tools: list[ToolInfo], choice: ToolChoice, config: GenerateConfig
) -> ModelOutput:
    gate = os.environ.get("INSPECT_TEST_GATE")
    while gate and not Path(gate).exists():  # a barrier the test opens
        await anyio.sleep(GATE_POLL_S)
    number = number_of(messages[-1].text)
    output = ModelOutput.from_content(model="mockllm/model", content="ok")
    output.usage = ModelUsage(
        input_tokens=MOCK_INPUT_BASE + number,
        input_tokens_cache_read=MOCK_CACHED,
        output_tokens=2,
        total_tokens=MOCK_INPUT_BASE + number + MOCK_CACHED + 2,
    )
    return output


def model() -> Model | None:
    if os.environ.get("INSPECT_TEST_MODEL", "mockllm") != "mockllm":
        return None  # --model on the command line
    return get_model("mockllm/model", custom_outputs=mock_output)


@task
def quota() -> Task:
    ids = os.environ["INSPECT_TEST_SAMPLES"].split(",")
    return Task(
        dataset=[Sample(input=f"sample {int(i[1:])}", target="ok", id=i) for i in ids],
        solver=generate(),
        scorer=match(),
        model=model(),
    )
