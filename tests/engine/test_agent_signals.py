"""The signal parser (pure logic): valid, sloppy, invalid and malicious blocks, and a property
test that it never raises. Also the stream filter that hides tags from a streamed reply."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from engine.agent.signals import FIELDS, SIGNAL_TYPES, parse_signal, strip_signal
from engine.report.agent import TagFilter

NT = '<signal type="need_turn" confidence="0.7"><reason>read the audit</reason></signal>'

# (reply, type or None, the invalid reason's words or None, step)
VALID = [
    (NT, "need_turn", "xml"),
    ("Answer.\n" + NT, "need_turn", "xml"),
    ('<signal type="context_sufficient" confidence="0.9" sources_found="3"/>',
     "context_sufficient", "xml"),
    ('<signal type="context_sufficient" confidence="0.9"><sources_found>3 sessions'
     '</sources_found><source_types>sessions, notes</source_types></signal>',
     "context_sufficient", "xml"),
    ('<signal type="stuck" confidence="0.2"><blocker>no data</blocker><attempted><item>'
     'search_vault</item><item>read_session</item></attempted></signal>', "stuck", "xml"),
    ('<signal type="need_capability" confidence="1"><capability>web_search</capability>'
     '<reason>the news is not in the vault</reason></signal>', "need_capability", "xml"),
    ('<signal type="partial_answer" confidence="0.5">the second audit</signal>',
     "partial_answer", "xml"),
    ('<signal type="delegation_recommended" confidence="0.4"><reason>too big</reason>'
     '<scope>all 300 sessions</scope><estimated_tokens>90000</estimated_tokens></signal>',
     "delegation_recommended", "xml"),
    ('<SIGNAL TYPE="Need-Turn" CONFIDENCE="0.3"><reason>x</reason></SIGNAL>', "need_turn",
     "xml"),
    ("<signal type='need_turn' confidence='0.6'><reason>single quotes</reason></signal>",
     "need_turn", "xml"),
    # repaired: bare & and <, an unclosed child, an unclosed block, unquoted attributes
    ('<signal type="need_turn" confidence="0.8"><reason>R&D notes</reason></signal>',
     "need_turn", "repaired"),
    ('<signal type="need_turn" confidence="0.8"><reason>dose < 5 mg</reason></signal>',
     "need_turn", "repaired"),
    ('<signal type="need_turn" confidence="0.8"><reason>unclosed child</signal>',
     "need_turn", "repaired"),
    ('Done. <signal type="partial_answer" confidence="0.5"><missing>round 7',
     "partial_answer", "repaired"),
    ('<signal type=need_turn confidence=0.5><reason>unquoted</reason></signal>',
     "need_turn", "repaired"),
    # only the attributes can be read
    ('<signal type="context_sufficient" confidence="0.9" sources_found="2">an HTML&nbsp;'
     'entity</signal>', "context_sufficient", "attributes"),
    ('<signal type="context_sufficient" confidence="0.9" sources_found="2" <<<>>> </signal>',
     "context_sufficient", "repaired"),
]

INVALID = [
    ('<signal type="bogus" confidence="0.5"><reason>x</reason></signal>', "unknown signal type"),
    ('<signal confidence="0.5"><reason>x</reason></signal>', "no type"),
    ('<signal type="need_turn" confidence="0.5"></signal>', "required field 'reason'"),
    ('<signal type="context_sufficient" confidence="0.5"/>', "required field 'sources_found'"),
    ('<signal type="context_sufficient" sources_found="many"/>', "not a whole number"),
    ('<signal type="stuck" confidence="0.1"><blocker>b</blocker></signal>',
     "required field 'attempted'"),
    ('<signal type="need_capability"><capability>web</capability></signal>',
     "required field 'reason'"),
    ('<signal type="delegation_recommended"><reason>r</reason></signal>',
     "required field 'scope'"),
    ("<signal", "cannot be read"),
    # malicious: entities are never expanded, DTDs never read, nothing fetched
    ('<!DOCTYPE s [<!ENTITY x SYSTEM "file:///etc/passwd">]><signal type="need_turn" '
     'confidence="0.5"><reason>&x;</reason></signal>', "required field 'reason'"),
    ('<signal type="need_turn" confidence="0.5"><!DOCTYPE lol [<!ENTITY a "aaaa">'
     '<!ENTITY b "&a;&a;&a;&a;">]><reason>&b;&b;</reason></signal>', "required field"),
    ('<signal type="&lol;" confidence="0.5"><reason>x</reason></signal>', "unknown signal"),
]


@pytest.mark.parametrize(("reply", "kind", "step"), VALID)
def test_valid_and_sloppy_signals_are_read_and_say_which_step_read_them(reply, kind,
                                                                        step) -> None:
    parsed = parse_signal(reply)
    assert parsed.invalid is None, parsed.invalid
    assert parsed.signal is not None and parsed.signal.type == kind
    assert parsed.step == step
    assert 0.0 <= parsed.signal.confidence <= 1.0
    assert parsed.signal.raw_xml and parsed.signal.timestamp.tzinfo is not None
    for name, _, required in FIELDS[kind]:
        assert not required or name in parsed.signal.fields


@pytest.mark.parametrize(("reply", "why"), INVALID)
def test_invalid_and_malicious_signals_are_reported_with_the_reason(reply, why) -> None:
    parsed = parse_signal(reply)
    assert parsed.signal is None and parsed.found
    assert parsed.invalid is not None and why in parsed.invalid
    assert "root:" not in parsed.invalid  # no file was read into it


def test_entities_are_never_expanded_anywhere() -> None:
    reply = ('<!DOCTYPE s [<!ENTITY x "EXPANDED">]><signal type="need_turn" confidence="0.5">'
             '<reason>&x; and more</reason></signal>')
    parsed = parse_signal(reply)
    assert "EXPANDED" not in repr(parsed.signal) and "EXPANDED" not in (parsed.invalid or "")


@pytest.mark.parametrize(("written", "read"), [
    ("0.7", 0.7), ("70", 0.7), ("70%", 0.7), (" 45 % ", 0.45), ("1", 1.0), ("0", 0.0),
    ("-3", 0.0), ("250", 1.0), ("high", 0.8), ("low", 0.2), ("nan", 0.5), ("", 0.5),
    ("sure", 0.5), ("1e309", 0.5),
])
def test_confidence_is_clamped_to_0_1_whatever_way_it_is_written(written, read) -> None:
    parsed = parse_signal(f'<signal type="need_turn" confidence="{written}">'
                          f'<reason>r</reason></signal>')
    assert parsed.signal is not None
    assert parsed.signal.confidence == pytest.approx(read)
    assert (parsed.notes == ()) == (written in ("0.7", "1", "0"))


def test_a_missing_confidence_is_forgiven_and_said() -> None:
    parsed = parse_signal('<signal type="need_turn"><reason>r</reason></signal>')
    assert parsed.signal is not None and parsed.signal.confidence == 0.5
    assert parsed.notes and "no confidence" in parsed.notes[0]


@pytest.mark.parametrize("reply", [
    "```xml\n" + NT + "\n```",
    "~~~\n" + NT + "\n~~~",
    "Use this format:\n```\n" + NT,  # a fence never closed runs to the end
    "Write `" + NT + "` at the end.",
    "Inline ``" + NT + "`` too.",
])
def test_signals_inside_code_are_not_signals(reply) -> None:
    parsed = parse_signal(reply)
    assert parsed.signal is None and not parsed.found


def test_only_the_last_block_outside_code_counts() -> None:
    stop = ('<signal type="context_sufficient" confidence="0.9"><sources_found>1'
            '</sources_found></signal>')
    assert parse_signal(NT + " then " + stop).signal.type == "context_sufficient"  # type: ignore[union-attr]
    assert parse_signal(stop + "\n```\n" + NT + "\n```").signal.type == "context_sufficient"  # type: ignore[union-attr]
    assert parse_signal(stop + " then " + NT).signal.type == "need_turn"  # type: ignore[union-attr]


def test_field_values_are_cleaned_and_bounded() -> None:
    reason = "\x1b[31mred\x1b[0m \u202eevil " + "x" * 2000
    parsed = parse_signal(f'<signal type="need_turn" confidence="0.5"><reason>{reason}'
                          '</reason></signal>')
    assert parsed.signal is not None
    value = parsed.signal.fields["reason"]
    assert "\x1b" not in value and "\u202e" not in value and len(value) <= 500


def test_a_huge_block_is_cut_and_still_never_raises() -> None:
    reply = '<signal type="need_turn" confidence="0.5"><reason>' + "<a>" * 50_000
    parsed = parse_signal(reply)
    assert parsed.found and (parsed.signal is None) == (parsed.invalid is not None)


def test_the_shown_reply_has_no_signal_block() -> None:
    assert strip_signal("The answer.\n" + NT) == "The answer."
    assert strip_signal("```\n" + NT + "\n```") == "```\n" + NT + "\n```"


def test_every_type_has_its_fields_in_the_table() -> None:
    assert set(SIGNAL_TYPES) == set(FIELDS)


_XMLISH = st.lists(st.sampled_from([
    "<signal", "</signal>", "<reason>", "</reason>", 'type="need_turn"', "type='stuck'",
    'confidence="70%"', ">", "<", "&", "&amp;", "&x;", "<!DOCTYPE", "<!ENTITY", "```", "`",
    "~~~", "\n", " ", "/>", '"', "'", "<item>", "<![CDATA[", "]]>", "<?xml", "?>", "\x00",
    "\u202e", "sources_found=", "3", "é", "<tool name=", "</tool>",
]), max_size=40).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=300), _XMLISH))
def test_the_parser_never_raises(text: str) -> None:
    parsed = parse_signal(text)
    assert parsed.signal is None or parsed.invalid is None
    if parsed.signal is not None:
        assert 0.0 <= parsed.signal.confidence <= 1.0


@settings(max_examples=200, deadline=None)
@given(_XMLISH, st.integers(min_value=1, max_value=9))
def test_the_tag_filter_gives_the_same_text_however_the_stream_is_cut(text: str,
                                                                     size: int) -> None:
    whole = TagFilter()
    expected = whole.feed(text) + whole.flush()
    pieces = TagFilter()
    got = "".join(pieces.feed(text[i:i + size]) for i in range(0, len(text), size))
    assert got + pieces.flush() == expected


def test_the_tag_filter_hides_signal_and_tool_blocks_only() -> None:
    reply = ('See <b>this</b>, a<3. <tool name="search_vault">Paris</tool>\n'
             '<toolbox>kept</toolbox> ' + NT)
    stream = TagFilter()
    out = "".join(stream.feed(reply[i:i + 3]) for i in range(0, len(reply), 3)) + stream.flush()
    assert out == "See <b>this</b>, a<3. \n<toolbox>kept</toolbox> "
