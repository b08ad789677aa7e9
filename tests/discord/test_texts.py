"""What the bot writes, without I/O: verdicts, podium changes, status messages."""

from __future__ import annotations

from services.discord import texts
from services.discord.texts import Standing

SCORE_S = 0.0000042  # 4.20 µs


def test_verdicts_name_the_place_or_the_kind_of_success():
    def verdict(standing: Standing) -> str:
        return texts.verdict("<@1>", "vectoradd", "H100", SCORE_S, standing)

    assert verdict(Standing(rank=1, is_best=True, earlier_scores=0)) == "<@1> 🥇 1st place on `vectoradd` on H100: 4.20 µs"
    assert verdict(Standing(rank=3, is_best=True, earlier_scores=4)).startswith("<@1> 🥉 3rd place")
    assert verdict(Standing(rank=12, is_best=True, earlier_scores=0)) == \
        "<@1> 🍾 First successful submission on `vectoradd` on H100: 4.20 µs, 12th place"
    assert verdict(Standing(rank=12, is_best=True, earlier_scores=2)) == \
        "<@1> 🎉 Personal best on `vectoradd` on H100: 4.20 µs, 12th place"
    assert verdict(Standing(rank=None, is_best=False, earlier_scores=2)) == \
        "<@1> ✅ Successful on `vectoradd` on H100: 4.20 µs"


def test_ordinals():
    assert [texts.ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == \
        ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]


def test_podium_changes_only_when_the_first_three_change():
    def entry(rank, user, score):
        return {"rank": rank, "user_id": user, "user_name": user, "score": score}

    top = [entry(1, "a", 1.0), entry(2, "b", 2.0), entry(3, "c", 3.0)]
    assert not texts.podium_changed(top + [entry(4, "d", 4.0)], top + [entry(4, "e", 3.5)])
    assert texts.podium_changed(top, [entry(1, "a", 1.0), entry(2, "c", 3.0)])
    assert texts.podium_changed(top, [entry(1, "a", 1.5), *top[1:]])
    assert texts.podium("b", "H100", top).splitlines()[1].startswith("🥇 a: ")


def test_status_message_stays_under_the_limit():
    text = texts.status_message("head", ["x" * 1500, "y" * 1500], "final")
    assert len(text) <= texts.MESSAGE_LIMIT and text.startswith("head\n")


def test_a_run_line_moves_from_queued_to_running_to_its_end_never_back():
    queued = texts.queued_line("H100", secret=True)
    assert queued == "⏳ H100 (secret): queued" and texts.is_pending(queued)
    running = texts.started_from(queued, "H100")
    assert running == "⏳ H100 (secret): running" and texts.is_pending(running)
    assert texts.started_from(None, "B200") == "⏳ B200: running"  # a run the bot learned of only when it started
    ended = "**H100 on Modal (secret) ✅ success**\n> ✅ Testing successful"
    assert not texts.is_pending(ended)
    assert texts.started_from(ended, "H100") is None  # a start applied after the end changes nothing
    assert texts.started_from(running, "H100") is None
