"""32 concurrent clients against the gateway over the stub: no lost, failed or mixed-up answers.

Each request's state names its own option (``want=k<n>``, an option only that request has) and a
truth word, and the stub answers from the prompt; an answer that reached the wrong caller would
name another request's option. Bounded in count (32 x 8 requests) and time (the test's timeout).
"""

from __future__ import annotations

import pytest

from tests.gateway.crowd import assert_each_got_its_own, crowd

pytestmark = pytest.mark.slow  # every test here starts a subprocess or a server (seconds each): scripts/test.sh --full runs them

CLIENTS, PER_CLIENT = 32, 8


@pytest.mark.timeout(180)
def test_concurrent_clients_get_their_own_answers(gateway_url, stub):
    assert_each_got_its_own(crowd(gateway_url, CLIENTS, PER_CLIENT), stub, CLIENTS * PER_CLIENT)
