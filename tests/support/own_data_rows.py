"""Small sets of one's own data both trainers' real-weight tests train on: a conversational record and a
prompt-completion record per index, short enough for a few CPU steps, with answers a model can learn."""

from __future__ import annotations

CITIES = [("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Egypt", "Cairo"),
          ("Peru", "Lima"), ("Kenya", "Nairobi"), ("Chile", "Santiago"), ("Greece", "Athens"), ("Cuba", "Havana")]


def conversation(i: int) -> dict:
    """Two assistant turns (both trained) after a system prompt and two user turns (not trained)."""
    country, city = CITIES[i % len(CITIES)]
    return {"messages": [
        {"role": "system", "content": "Answer in one short sentence."},
        {"role": "user", "content": f"Ticket {i}: what is the capital of {country}?"},
        {"role": "assistant", "content": f"The capital of {country} is {city}."},
        {"role": "user", "content": "Thank you."},
        {"role": "assistant", "content": f"Glad to help with ticket {i}."},
    ]}  # fmt: skip


def prompt_completion(i: int) -> dict:
    """Columns named otherwise (`question`, `answer`): the run maps them."""
    country, city = CITIES[i % len(CITIES)]
    return {"question": f"Ticket {i}: capital of {country}?", "answer": f"{city}, ticket {i}."}
