"""The message channel: one JSON object per line over a socket pair."""

import socket

import pytest

from task_sdk.comms import Channel, ChannelClosedError


@pytest.fixture
def pair():
    left, right = socket.socketpair()
    yield Channel(left), right
    left.close()
    right.close()


def test_messages_split_across_reads_and_batched_in_one_read(pair):
    channel, other = pair
    other.sendall(b'{"type":"A"}\n\n{"type":"B"}\n{"ty')
    assert channel.receive() == {"type": "A"}
    assert channel.receive() == {"type": "B"}  # from the buffer, blank line skipped
    other.sendall(b'pe":"C"}\n')
    assert channel.receive() == {"type": "C"}


def test_pending_returns_every_complete_message_and_keeps_the_rest(pair):
    channel, other = pair
    other.sendall(b'{"n":1}\n{"n":2}\n{"n":')
    assert channel.feed()
    assert channel.pending() == [{"n": 1}, {"n": 2}]
    assert channel.pending() == []
    other.sendall(b"3}\n")
    assert channel.receive() == {"n": 3}


def test_receive_raises_when_the_other_side_closed(pair):
    channel, other = pair
    other.sendall(b'{"last":true}\n')
    other.close()
    assert channel.receive() == {"last": True}
    with pytest.raises(ChannelClosedError):
        channel.receive()


def test_send_is_one_compact_line(pair):
    channel, other = pair
    channel.send({"type": "OK", "x": [1, 2]})
    assert other.recv(100) == b'{"type":"OK","x":[1,2]}\n'
