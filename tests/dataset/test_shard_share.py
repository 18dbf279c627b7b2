"""What a partition over many ranks leaves unread (issue 69): AISHELL-1's 121 shards of 1000 on 8 x 8 GPUs."""
import pytest

from wenet_udps.dataset.lists import partition, unread_share


@pytest.mark.parametrize("items, world", [(121, 64), (121, 8), (282, 64), (1201, 64), (16, 2), (5, 8)])
def test_unread_share_is_what_the_partition_leaves_over_the_smallest_share(items, world):
    shares = [len(partition(items, rank=r, world_size=world, worker_id=0, num_workers=1, shuffle=True, seed=1,
                            epoch=0)) for r in range(world)]
    # the epoch ends when the rank with the fewest items runs out: the items beyond that share go unread
    assert unread_share(items, world) == pytest.approx(1 - world * min(shares) / items)


def test_aishell_shards_of_1000_on_64_ranks_leave_almost_half_unread():
    assert unread_share(121, 64) == pytest.approx(57 / 121)   # 0.47: ranks read one shard or two
    assert unread_share(1201, 64) < 0.05                         # 100 utterances a shard: 1201 shards
