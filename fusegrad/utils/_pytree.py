"""``torch.utils._pytree``: flatten nested containers to leaves and a ``TreeSpec``, map over
leaves, and register container types, with PyTorch's names and conventions (tuples, lists,
dicts in insertion order, OrderedDict, defaultdict, deque and namedtuples are nodes; None
and everything else is a leaf)."""
from __future__ import annotations

import collections
from typing import Any, Callable, Iterable, List, NamedTuple, Optional, Tuple

__all__ = ["TreeSpec", "LeafSpec", "register_pytree_node", "tree_flatten", "tree_unflatten", "tree_leaves",
           "tree_structure", "tree_iter", "tree_map", "tree_map_", "tree_map_only", "tree_map_only_", "tree_all",
           "tree_any", "tree_all_only", "tree_any_only", "treespec_pprint", "SUPPORTED_NODES"]


class NodeDef(NamedTuple):
    type: type
    flatten_fn: Callable[[Any], Tuple[List[Any], Any]]  # node -> (children, context)
    unflatten_fn: Callable[[Iterable[Any], Any], Any]  # (children, context) -> node


SUPPORTED_NODES: dict = {}


def register_pytree_node(cls: type, flatten_fn: Callable, unflatten_fn: Callable, *,
                         serialized_type_name: Optional[str] = None, to_dumpable_context=None,
                         from_dumpable_context=None, flatten_with_keys_fn=None) -> None:
    """Make ``cls`` a node: ``flatten_fn(node) -> (children, context)`` and
    ``unflatten_fn(children, context) -> node`` (the serialization arguments are accepted)."""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn)


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _node_type(tree) -> Optional[type]:
    if _is_namedtuple(tree):
        return collections.namedtuple  # (stands for every namedtuple class; the class is the context)
    t = type(tree)
    return t if t in SUPPORTED_NODES else None


register_pytree_node(tuple, lambda t: (list(t), None), lambda c, _: tuple(c))
register_pytree_node(list, lambda t: (list(t), None), lambda c, _: list(c))
register_pytree_node(dict, lambda d: (list(d.values()), list(d.keys())), lambda c, keys: dict(zip(keys, c)))
register_pytree_node(collections.OrderedDict, lambda d: (list(d.values()), list(d.keys())),
                     lambda c, keys: collections.OrderedDict(zip(keys, c)))
register_pytree_node(collections.defaultdict, lambda d: (list(d.values()), (d.default_factory, list(d.keys()))),
                     lambda c, ctx: collections.defaultdict(ctx[0], zip(ctx[1], c)))
register_pytree_node(collections.deque, lambda d: (list(d), d.maxlen), lambda c, n: collections.deque(c, maxlen=n))
register_pytree_node(collections.namedtuple, lambda t: (list(t), type(t)), lambda c, cls: cls(*c))


class TreeSpec:
    """A container's structure: its node ``type``, ``context`` (dict keys, a namedtuple's
    class) and one ``TreeSpec`` per child; a leaf is ``LeafSpec()``."""

    def __init__(self, type: Optional[type], context: Any, children_specs: List["TreeSpec"]):  # noqa: A002
        self.type, self.context, self.children_specs = type, context, children_specs
        self.num_nodes = 1 + sum(s.num_nodes for s in children_specs)
        self.num_leaves = sum(s.num_leaves for s in children_specs)
        self.num_children = len(children_specs)

    def is_leaf(self) -> bool:
        return self.type is None

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        return tree_unflatten(leaves, self)

    def __eq__(self, other) -> bool:
        return isinstance(other, TreeSpec) and (self.type, self.context, self.children_specs) == (
            other.type, other.context, other.children_specs)

    def __hash__(self):
        return hash((self.type, repr(self.context), tuple(self.children_specs)))

    def __repr__(self, indent: int = 0) -> str:
        if self.is_leaf():
            return "*"
        children = (",\n" + " " * (indent + 2)).join(s.__repr__(indent + 2) for s in self.children_specs)
        return f"TreeSpec({self.type.__name__}, {self.context}, [{children}])"


class LeafSpec(TreeSpec):
    def __init__(self):
        super().__init__(None, None, [])
        self.num_nodes, self.num_leaves = 1, 1


def _flatten(tree, is_leaf, leaves: list) -> TreeSpec:
    node = None if is_leaf is not None and is_leaf(tree) else _node_type(tree)
    if node is None:
        leaves.append(tree)
        return LeafSpec()
    children, context = SUPPORTED_NODES[node].flatten_fn(tree)
    return TreeSpec(node, context, [_flatten(c, is_leaf, leaves) for c in children])


def tree_flatten(tree, is_leaf: Optional[Callable[[Any], bool]] = None) -> Tuple[List[Any], TreeSpec]:
    """The leaves of ``tree`` in order and its ``TreeSpec``."""
    leaves: list = []
    return leaves, _flatten(tree, is_leaf, leaves)


def _build(spec: TreeSpec, it) -> Any:
    if spec.is_leaf():
        return next(it)
    return SUPPORTED_NODES[spec.type].unflatten_fn([_build(s, it) for s in spec.children_specs], spec.context)


def tree_unflatten(leaves: Iterable[Any], treespec: TreeSpec) -> Any:
    """The tree of ``treespec``'s structure holding ``leaves``."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten(leaves, treespec): Expected `treespec` to be instance of TreeSpec but "
                        f"got item of type {type(treespec)}.")
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers to a "
                         f"pytree that holds {treespec.num_leaves} items ({treespec}).")
    return _build(treespec, iter(leaves))


def tree_leaves(tree, is_leaf=None) -> List[Any]:
    return tree_flatten(tree, is_leaf)[0]


def tree_iter(tree, is_leaf=None):
    return iter(tree_leaves(tree, is_leaf))


def tree_structure(tree, is_leaf=None) -> TreeSpec:
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func: Callable, tree, *rests, is_leaf=None) -> Any:
    """``tree``'s structure with ``func`` of each leaf (and the leaves of ``rests`` at the same
    places, which must have ``tree``'s structure)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = []
    for r in rests:
        r_leaves, r_spec = tree_flatten(r, is_leaf)
        if r_spec != spec:
            raise ValueError(f"Tree structure mismatch: {r_spec} is not {spec}")
        others.append(r_leaves)
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)


def tree_map_(func: Callable, tree, *rests, is_leaf=None) -> Any:
    """``func`` on each leaf for its side effect; returns ``tree``."""
    tree_map(func, tree, *rests, is_leaf=is_leaf)
    return tree


def _only(types, func: Callable) -> Callable:
    return lambda x: func(x) if isinstance(x, types) else x


def tree_map_only(type_or_types, func: Callable, tree, is_leaf=None) -> Any:
    """``tree_map`` applying ``func`` to the leaves of the given type(s) only."""
    return tree_map(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types, func: Callable, tree, is_leaf=None) -> Any:
    return tree_map_(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_all(pred: Callable, tree, is_leaf=None) -> bool:
    return all(pred(x) for x in tree_leaves(tree, is_leaf))


def tree_any(pred: Callable, tree, is_leaf=None) -> bool:
    return any(pred(x) for x in tree_leaves(tree, is_leaf))


def tree_all_only(type_or_types, pred: Callable, tree, is_leaf=None) -> bool:
    return all(pred(x) for x in tree_leaves(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types, pred: Callable, tree, is_leaf=None) -> bool:
    return any(pred(x) for x in tree_leaves(tree, is_leaf) if isinstance(x, type_or_types))


def treespec_pprint(treespec: TreeSpec) -> str:
    return repr(treespec)
