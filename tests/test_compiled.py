"""The compiled passes (walk, render, decode, encode) give what the general ones give."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.core.codec import BytesModel, Layout, decode, encode
from grammars import PROFILES
from harness.core.grammar import load_file, load_profile
from harness.core.render import renderer
from harness.core.tree import choice_nodes, replace_at, walk_nodes
from harness.core.tree_index import TreeIndex
from harness.core.walk import RandomModel, random_trees, walker

GRAMMARS = Path(__file__).resolve().parent / "grammars"
SOURCES = [*PROFILES, *sorted(p.name for p in GRAMMARS.glob("*.py"))]


def _grammar(source: str):
    return load_profile(source) if source in PROFILES else load_file(str(GRAMMARS / source))


class _GeneralRandom(RandomModel):
    """The same model, walked by the general walk (the reference)."""

    compiled_walk = None


class _GeneralBytes(BytesModel):
    compiled_walk = None


@pytest.mark.parametrize("source", SOURCES)
def test_compiled_passes_match_the_general_ones(source):
    g = _grammar(source)
    compiled = list(random_trees(g, 5, 150))
    general = walker(g, _GeneralRandom(g, random.Random(5)))
    assert compiled == [general(g.start, 0) for _ in range(150)]
    for style in g.renderings:
        r = renderer(g, style)
        assert [r.render(t) for t in compiled] == [r.interpret(t) for t in compiled]
    rng = random.Random(2)
    model = _GeneralBytes(g, b"", {})
    read = walker(g, model)
    for _ in range(150):
        data = rng.randbytes(rng.randrange(0, 120))
        model.reset(data)
        assert decode(data, g) == read(g.start, 0)


@pytest.mark.parametrize("source", SOURCES)
def test_an_edit_is_encoded_by_splicing(source):
    g = _grammar(source)
    rng = random.Random(3)
    trees = list(random_trees(g, 9, 40))
    for tree in trees:
        layout = Layout(tree, g)
        assert layout.encoding == encode(tree, g)
        assert decode(encode(tree, g), g) == tree
        paths = list(layout.spans)
        for path in rng.sample(paths, min(5, len(paths))):
            old = dict(walk_nodes(tree))[path]
            donor = next((n for _, n in walk_nodes(trees[rng.randrange(len(trees))]) if n[0] == old[0]), old)
            for new in (donor, old, (old[0], old[1], old[2])):
                assert layout.replaced(path, new, g) == encode(replace_at(tree, path, new), g)


@pytest.mark.parametrize("source", SOURCES)
def test_the_tree_index_lists_and_splices_nodes(source):
    """choice_nodes against a plain pre-order walk; an edited tree's spliced entry against
    listing it afresh (through two edits in a row, as libFuzzer chains mutations)."""
    g = _grammar(source)
    rng = random.Random(4)
    trees = list(random_trees(g, 11, 60))

    def listed(tree):
        return [(p, n) for p, n in walk_nodes(tree) if g.unique[n[0]] is None]

    index = TreeIndex(g)
    for tree in trees:
        assert choice_nodes(g, tree) == listed(tree)
        current = tree
        for _ in range(2):
            entry = index(current)
            if not entry.nodes:
                break
            assert entry.choices is not None  # computed: the splice carries it over
            path, old = entry.nodes[rng.randrange(len(entry.nodes))]
            donor = next((n for _, n in walk_nodes(trees[rng.randrange(len(trees))]) if n[0] == old[0]), old)
            result = replace_at(current, path, donor)
            index.edited(current, path, donor, result)
            spliced = index(result)
            assert spliced.nodes == listed(result)
            assert all(a[1] is b[1] for a, b in zip(spliced.nodes, listed(result)))  # the new spine's nodes
            assert spliced.choices == [(p, n) for p, n in listed(result) if len(g.alts[n[0]]) > 1]
            current = result


@pytest.mark.parametrize("source", SOURCES)
def test_a_batch_renders_as_its_programs_one_by_one(source):
    """render_batch (what `generate -o -` writes) against render per tree, joined; the
    batch read from a generator, as the stream gives it."""
    g = _grammar(source)
    trees = list(random_trees(g, 8, 120))
    for style in g.renderings:
        r = renderer(g, style)
        one_by_one = [r.render(t) for t in trees]
        assert r.render_batch(iter(trees), "// -----\n") == "// -----\n".join(one_by_one)
        assert r.render_batch([]) == ""
        assert [r.render(t) for t in trees] == one_by_one  # no state left behind
