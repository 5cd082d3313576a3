"""The messages of a conversation: what the candidate sees at each turn, and what the simulated user sees.

Why apart from judge/prompts.py: a conversation is built turn by turn from the transcript so far (run/dialogue.py
drives it); this module only turns (spec, question, transcript) into chat messages, with no call and no I/O.

The candidate's view: the spec's candidate.system, candidate.template (as an extra system message, as in
chat_turns mode), the data's fixed dialogue prefix, then the transcript (user, assistant, user, ...).
A simulated user's turn may carry its hidden state (`state`, a spec's user_state:): the simulator sees its own
lines with their states, the candidate never does.
The simulator's view has the roles swapped, so a chat model plays the user naturally: its persona
(`conversation.simulator.system`, rendered from the row) as the system message, the optional opening
(`conversation.simulator.template`) as the first user message, then the prefix and the transcript with every
candidate line as `user` and its own lines as `assistant` (system turns of the prefix are left out).

Simulator template variables: `question` (its fields: id, subset, reference, ...), `row` (the data row as read:
persona fields live there), `dialogue`, `reference`, `max_turns`, `stop` (the signal that ends the session).
A template that renders only whitespace is an error naming the file and the question: an empty message is
never sent.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rubric_engine.datatypes import Question
from rubric_engine.errors import SpecError
from rubric_engine.judge.prompts import candidate_messages, dialogue_vars, render_template
from rubric_engine.spec.userstate import written

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["candidate_prefix", "candidate_view", "simulator_view", "SWAP"]

Message = dict[str, str]
SWAP = {"user": "assistant", "assistant": "user"}


def candidate_prefix(spec: "BenchmarkSpec", question: Question) -> list[Message]:
    """What precedes the conversation for the candidate: system messages and the data's fixed dialogue."""
    return candidate_messages(spec, question, mode="chat_turns")


def candidate_view(prefix: Sequence[Message], transcript: Sequence[Mapping[str, Any]]) -> list[Message]:
    """The candidate's next request: the prefix, then every turn so far in order (the turns' own {role, content}
    messages, shared from one request to the next as the prefix's are: nothing is copied per turn, but a simulated
    user's turn that carries its hidden `state`, sent as its words alone)."""
    if not any(map(operator.contains, transcript, itertools.repeat("state"))):  # (in C: the usual case)
        return [*prefix, *transcript]
    return [*prefix, *(t if "state" not in t else {"role": t["role"], "content": t["content"]} for t in transcript)]


def _variables(spec: "BenchmarkSpec", question: Question) -> dict[str, Any]:
    conv = spec.conversation
    return {"question": question, "row": dict(question.source_row), "dialogue": dialogue_vars(spec, question),
            "reference": question.reference, "max_turns": conv.max_turns, "stop": conv.stop}


def _rendered(spec: "BenchmarkSpec", field: str, question: Question, variables: dict[str, Any]) -> str:
    text = render_template(spec, field, variables)
    if not text.strip():
        raise SpecError(str(spec.template_path(field)), field, f"rendered an empty message for question {question.id}",
                        fix="the template must write the simulated user's instructions for every row "
                            "(check the row fields it reads)")
    return text


def simulator_view(spec: "BenchmarkSpec", question: Question, transcript: Sequence[Mapping[str, str]]) -> list[Message]:
    """The simulated user's next request: persona, optional opening, then the conversation with roles swapped."""
    sim = spec.conversation.simulator
    assert sim is not None  # spec/checks.py: simulated mode needs one
    variables = _variables(spec, question)
    messages = [{"role": "system", "content": _rendered(spec, "conversation.simulator.system", question, variables)}]
    if sim.template:
        messages.append({"role": "user", "content": _rendered(spec, "conversation.simulator.template", question,
                                                              variables)})
    prefix = [t for t in variables["dialogue"] if t["role"] != "system"]
    said = [{"role": "assistant" if t["role"] == "user" else "user", "content": t["content"]} for t in prefix]
    said += [{"role": SWAP[t["role"]], "content": t["content"] if "state" not in t else written(t["content"], t["state"])}
             for t in transcript]  # its own lines as it wrote them, each hidden state included
    return messages + said
