"""What a question must be and how often it is asked for: the tries, the grammar a
demonstration model's question is held to, the temperature of the last try, and `NoQuestion`
when none was usable. The loop (`interrogation.loop`) asks; `interrogation.checks` names what
is wrong with a question."""

from __future__ import annotations

from engine.errors import DetektivError

__all__ = ["DEMONSTRATION_ATTEMPTS", "QUESTION_ATTEMPTS", "QUESTION_GRAMMAR",
           "RETRY_TEMPERATURE", "NoQuestion"]

QUESTION_ATTEMPTS = 3
"""Times the detective is asked for a usable question before the questioning closes (the
session fails when not one round was asked)."""
DEMONSTRATION_ATTEMPTS = 6
"""The same for a demonstration model: its questions only show the loop, and a tiny model
that echoes the hypothesis into its question (a leading question) needs more draws to give
one that is not."""
QUESTION_GRAMMAR = r'''root ::= [A-Z] [^\n?<]{8,190} "?"'''
"""One line that starts with a capital, ends with its only question mark, 200 characters at
most: what a demonstration model's question is held to (`StreamRequest.demonstration_grammar`;
a capable model is never constrained). `<` is left out: a tiny model that spells its chat
template's end-of-turn marker (`<end_of_turn>`) as text makes the server stop on it as a stop
word, mid-line, whatever the grammar says."""
RETRY_TEMPERATURE = 0.8
"""The temperature the last of those attempts uses at least (the configured one when higher);
the others keep the configured one (at temperature 0 a model that said nothing twice says
nothing again)."""


class NoQuestion(DetektivError):
    """The detective gave no usable question in all its tries (`QUESTION_ATTEMPTS`, or
    `DEMONSTRATION_ATTEMPTS`): a rule of ours was broken, so the questioning closes (the
    session fails only when not one round was asked)."""
