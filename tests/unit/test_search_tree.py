"""The search trees (search/tree.py): best-first order, length normalisation, duplicates, cycles, depth,
MCTS selection and progressive sampling, budgets; pure and deterministic."""

from __future__ import annotations

import math
from dataclasses import replace

from sgsbatch.config.schema import SearchConfig
from sgsbatch.search.environment import TacticResult
from sgsbatch.search.tree import Edge, Search

BFS = SearchConfig(algorithm="best_first", max_expansions=50, max_depth=10)
MCTS = SearchConfig(algorithm="mcts", max_expansions=50, mcts_simulations=50, max_depth=10)


def ok(state: int, *goals: str) -> TacticResult:
    return TacticResult(True, state, tuple(goals))


def fail(error: str = "unknown identifier") -> TacticResult:
    return TacticResult(False, error=error)


def test_best_first_expands_the_open_node_of_highest_summed_logprob() -> None:
    s = Search(0, ("⊢ P",), BFS)
    root = s.next_node()
    assert root is s.root
    s.expand(root, [Edge("a", -2.0, ok(1, "A")), Edge("b", -0.5, ok(2, "B")), Edge("c", -1.0, ok(3, "C"))])
    b = s.next_node()
    assert b is not None and b.tactic == "b"
    # b's children are worse than c (-0.5 - 1.0 = -1.5 < -1.0): c comes next, then b's child, then a
    s.expand(b, [Edge("b1", -1.0, ok(4, "B1"))])
    order = [s.next_node() for _ in range(3)]
    assert [n.tactic for n in order if n is not None] == ["c", "b1", "a"]
    assert s.next_node() is None  # nothing open: the search is exhausted


def test_length_alpha_favours_deeper_paths() -> None:
    """BFS-Prover's normalisation: with alpha = 1 the chain deep (-1), d2 (-2 over 2), d3 (-3 over 3) stays
    ahead of shallow (-1.5 over 1); with alpha = 0 shallow comes before d2."""
    children = {"deep": "d2", "d2": "d3"}
    for alpha, order in ((0.0, ["deep", "shallow", "d2"]), (1.0, ["deep", "d2", "d3"])):
        s = Search(0, ("⊢ P",), replace(BFS, length_alpha=alpha))
        root = s.next_node()
        assert root is not None
        s.expand(root, [Edge("deep", -1.0, ok(1, "D1")), Edge("shallow", -1.5, ok(2, "S"))])
        seen = []
        for i in range(3):
            node = s.next_node()
            assert node is not None and node.tactic is not None
            seen.append(node.tactic)
            nxt = children.get(node.tactic)
            s.expand(node, [Edge(nxt, -1.0, ok(10 + i, nxt.upper()))] if nxt else [])
        assert seen == order, alpha


def test_found_proof_path_failed_edges_cycles_and_duplicates() -> None:
    s = Search(0, ("⊢ P",), BFS)
    root = s.next_node()
    assert root is not None
    s.expand(root, [Edge("bad", -0.1, fail()), Edge("intro x", -0.2, ok(1, "x\n⊢ P")),
                    Edge("noop", -0.3, ok(2, "⊢ P")), Edge("intro y", -0.4, ok(3, "x\n⊢ P"))])
    assert (s.stats.failed_edges, s.stats.cycles, s.stats.duplicates) == (1, 1, 1)
    assert [c.tactic for c in root.children] == ["intro x"]
    node = s.next_node()
    assert node is not None
    s.expand(node, [Edge("simp", -0.5, ok(4))])
    assert s.found is not None and s.over()
    assert [n.tactic for n in s.found.path()] == ["intro x", "simp"]
    assert s.next_node() is None


def test_max_depth_and_expansion_budget() -> None:
    s = Search(0, ("⊢ P",), replace(BFS, max_depth=1))
    root = s.next_node()
    assert root is not None
    s.expand(root, [Edge("a", -1.0, ok(1, "A"))])
    assert s.next_node() is None  # the child is at max_depth: never expanded
    s = Search(0, ("⊢ P",), replace(BFS, max_expansions=2))
    for i in range(2):
        node = s.next_node()
        assert node is not None
        s.expand(node, [Edge(f"t{i}", -1.0, ok(i + 1, f"G{i}"))])
    assert s.over() and s.next_node() is None


def test_mcts_prior_and_ucb_pick_the_likelier_tactic_and_resample_a_dead_end() -> None:
    cfg = replace(MCTS, mcts_prior_temperature=1.0)
    s = Search(0, ("⊢ P",), cfg)
    root = s.next_node()
    assert root is s.root
    s.expand(root, [Edge("likely", math.log(0.9), ok(1, "A")), Edge("unlikely", math.log(0.1), ok(2, "B"))])
    assert root.visits == 1 and root.value() == 0.0  # no value model: a leaf's value is 0
    first = s.next_node()
    assert first is not None and first.tactic == "likely"
    s.expand(first, [Edge("dead end", -1.0, fail())])  # no legal tactic: no_actions_value backs up
    assert first.value() == cfg.mcts_no_actions_value
    assert root.value_sum == cfg.mcts_no_actions_value + first.reward
    # nanoproof's pseudocode: a visited child's value score discount ** (-1 - value) is in (0, 1], an
    # unvisited one's 0, and the prior term is small (c_init 0.001): the dead end is chosen again and, having
    # no legal tactic, sampled again (not marked dead)
    nxt = s.next_node()
    assert nxt is first
    assert s._ucb(root, first) > s._ucb(root, root.children[1]) > 0


def test_mcts_progressive_sampling_expands_a_node_again() -> None:
    cfg = replace(MCTS, mcts_ps_c=1.0, mcts_ps_alpha=0.0)  # expansions <= 1 * visits ** 0 = 1: sample again once
    s = Search(0, ("⊢ P",), cfg)
    root = s.next_node()
    assert root is not None
    s.expand(root, [Edge("a", -1.0, ok(1, "A"))])
    again = s.next_node()
    assert again is s.root and root.expansions == 1
    s.expand(root, [Edge("b", -1.0, ok(2, "B"))])
    assert [c.tactic for c in root.children] == ["a", "b"]
    nxt = s.next_node()
    assert nxt is not None and nxt.parent is root  # two expansions > 1: descend now


def test_mcts_budget_is_the_smaller_of_simulations_and_expansions() -> None:
    assert Search(0, ("⊢ P",), replace(MCTS, mcts_simulations=7, max_expansions=50)).budget == 7
    assert Search(0, ("⊢ P",), replace(MCTS, mcts_simulations=70, max_expansions=5)).budget == 5


def test_same_edges_give_the_same_tree() -> None:
    def run(cfg: SearchConfig) -> list[str]:
        s = Search(0, ("⊢ P",), cfg)
        order = []
        for i in range(12):
            node = s.next_node()
            if node is None:
                break
            order.append(node.tactic or "root")
            s.expand(node, [Edge(f"{i}.{k}", -0.1 * ((i * 7 + k * 3) % 5), ok(100 * i + k, f"G{i}.{k}"))
                            for k in range(3)])
        return order

    for cfg in (BFS, MCTS):
        assert run(cfg) == run(cfg)
        assert len(run(cfg)) == 12
