"""The profile route's capture options over HTTP, sent as released popcorn-cli sends them
(tests/support/popcorn_profile.py): each invalid option refused with a 400 naming it before any stream starts, as
upstream KernelBot's route refuses it."""

from __future__ import annotations

import pytest

from tests.gateway.conftest import CODE, new_user
from tests.support.popcorn_profile import profile_request


def post(gateway, cli_id: str, **options):
    headers, body = profile_request(cli_id, "submission.py", CODE.encode(), **options)
    return gateway.http.post("/profile/open/null", headers=headers, content=body)


@pytest.mark.parametrize(("options", "detail"), [
    ({"benchmark_index": -1}, "benchmark_index must be an integer from 0 to 1000000"),
    ({"benchmark_index": "first"}, "benchmark_index must be an integer from 0 to 1000000"),
    ({"ncu_launch_count": 0}, "ncu_launch_count must be an integer from 1 to 200"),
    ({"launch_count": 0}, "ncu_launch_count must be an integer from 1 to 200"),
    ({"ncu_kernel_name_base": "pretty"}, "ncu_kernel_name_base must be function, demangled, or mangled"),
    ({"ncu_kernel_name": "k" * 1025}, "ncu_kernel_name must contain 1..1024 characters without NUL"),
    ({"ncu_kernel_name": "gemm", "kernel_name": "copy"},
     "ncu_kernel_name and kernel_name name the same option: give one of them"),
])
def test_an_invalid_capture_option_is_a_400_naming_it(gateway, options, detail):
    _, cli_id = new_user(gateway)
    response = post(gateway, cli_id, **options)
    assert response.status_code == 400, response.text
    assert response.json()["detail"] == detail
    assert response.headers["content-type"].startswith("application/json")  # refused before the stream


def test_valid_options_under_both_names_start_the_stream(gateway):
    _, cli_id = new_user(gateway)
    for options in ({"benchmark_index": 0, "ncu_kernel_name": "regex:gemm", "ncu_kernel_name_base": "demangled",
                     "ncu_launch_count": 3}, {"kernel_name": "gemm", "launch_count": 2, "ncu_launch_count": 2}):
        response = post(gateway, cli_id, **options)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/event-stream")
