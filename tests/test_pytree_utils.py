"""fusegrad.utils._pytree against torch.utils._pytree: flattening order, specs, maps,
namedtuples, registered classes and errors."""
import collections

import pytest

import fusegrad.utils._pytree as fp

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch
tp = torch.utils._pytree
Point = collections.namedtuple("Point", "x y")


class Box:
    def __init__(self, a, b):
        self.a, self.b = a, b


def _trees():
    return [[1, None, (2, {"b": 3, "a": 4})], {"k": Point(5, [6, 7])}, collections.OrderedDict(z=1, y=(2,)),
            collections.deque([1, 2], maxlen=3), 8, (), Point(1, 2)]


def test_flatten_unflatten_and_maps_match_torch():
    for tree in _trees():
        leaves, spec = fp.tree_flatten(tree)
        t_leaves, t_spec = tp.tree_flatten(tree)
        assert leaves == t_leaves and spec.num_leaves == t_spec.num_leaves and spec.num_nodes == t_spec.num_nodes
        assert repr(spec) == repr(t_spec)
        rebuilt = fp.tree_unflatten([x * 10 if isinstance(x, int) else x for x in leaves], spec)
        assert rebuilt == tp.tree_unflatten([x * 10 if isinstance(x, int) else x for x in t_leaves], t_spec)
        assert type(rebuilt) is type(tree)
        assert fp.tree_map(lambda x: x, tree) == tp.tree_map(lambda x: x, tree)
        assert fp.tree_map_only(int, lambda x: -x, tree) == tp.tree_map_only(int, lambda x: -x, tree)
        assert fp.tree_leaves(tree) == tp.tree_leaves(tree) and fp.tree_structure(tree) == spec
    assert fp.tree_map(lambda a, b: a + b, [1, (2,)], [10, (20,)]) == [11, (22,)]
    assert fp.tree_all(lambda x: x > 0, [1, (2,)]) and not fp.tree_any(lambda x: x > 5, {"a": 1})
    with pytest.raises(ValueError):
        fp.tree_unflatten([1], fp.tree_structure((1, 2)))


def test_a_registered_class_is_a_node():
    fp.register_pytree_node(Box, lambda b: ([b.a, b.b], None), lambda c, _: Box(*c))
    try:
        leaves, spec = fp.tree_flatten([Box(1, (2, 3))])
        assert leaves == [1, 2, 3]
        out = fp.tree_unflatten([4, 5, 6], spec)
        assert isinstance(out[0], Box) and out[0].a == 4 and out[0].b == (5, 6)
        with pytest.raises(ValueError):
            fp.register_pytree_node(Box, lambda b: ([], None), lambda c, _: Box(0, 0))
    finally:
        del fp.SUPPORTED_NODES[Box]
