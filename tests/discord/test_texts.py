"""What the bot writes, without I/O: verdicts, podium changes, status messages."""

from __future__ import annotations

from services.discord import podium, texts
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


def entry(rank, user, score):
    return {"rank": rank, "user_id": user, "user_name": user.upper(), "score": score}


def test_the_podium_is_news_on_a_new_first_or_a_change_of_who_is_in_the_top_three():
    top = [entry(1, "a", 1.0), entry(2, "b", 2.0), entry(3, "c", 3.0)]
    assert podium.change(top + [entry(4, "d", 4.0)], top + [entry(4, "e", 3.5)]) is None  # below the podium
    assert podium.change([entry(1, "a", 0.5), *top[1:]], top) is None  # a better score of the #1
    assert podium.change([top[0], entry(2, "c", 1.5), entry(3, "b", 2.0)], top) is None  # #2 and #3 swap
    entered = podium.change(top, top[:2])
    assert entered.new_first is None and [e["user_id"] for e in entered.entered] == ["c"] and not entered.left
    dethroned = podium.change([entry(1, "b", 0.9), entry(2, "a", 1.0), entry(3, "c", 3.0)], top)
    assert dethroned.new_first["user_id"] == "b" and dethroned.dethroned["user_id"] == "a"
    assert podium.change(top[:1], []).new_first["user_id"] == "a"  # the first score on a board


def test_the_podium_news_names_display_names_and_what_moved():
    top = [entry(1, "a", 1.0e-6), entry(2, "b", 2.0e-6), entry(3, "c", 3.0e-6)]
    replaced = podium.change([entry(1, "d", 0.5e-6), *top[:2]], top)
    assert texts.podium_news("vectoradd", "H100", replaced).splitlines() == [
        "🏆 **D** took first place on `vectoradd` (H100): 500 ns", "**C** left the top three.",
        "**A** lost first place."]
    entered = podium.change(top, top[:2])
    assert texts.podium_news("vectoradd", "H100", entered) == "🥉 **C** entered the top three on `vectoradd` (H100): 3.00 µs"


def test_beginner_boards_are_not_announced():
    assert not podium.announced_board("vectoradd_v2") and not podium.announced_board("Histogram_v2")
    assert podium.announced_board("nvfp4_gemv")


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
