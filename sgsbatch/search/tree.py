"""Search trees over proof states: best-first (BFS-Prover) and MCTS (nanoproof), pure and deterministic.

A search is driven from outside, one expansion at a time: `next_node()` names the node to expand
(None: nothing left to expand), the driver samples `search.width` tactics for its goals and
applies them in the environment, and `expand(node, edges)` adds the children. No clock, no
randomness: the same edges give the same tree, so a search is reproducible under its seed (the
driver seeds the sampling per expansion). Budgets (expansions, time) are the driver's.

- **Best-first** (`search.algorithm = "best_first"`, BFS-Prover arXiv 2502.03438 §2): every open
  node has the priority `sum of its path's tactic log-probabilities / depth ** length_alpha`; the
  open node of highest priority is expanded next (ties: the older node).
- **MCTS** (`"mcts"`, nanoproof's AlphaProof-style search): from the root, descend by the UCB score
  `pb_c * prior / sum(sibling priors) + discount ** (-1 - (reward + value))`, with
  `pb_c = (log((N + c_base + 1) / c_base) + c_init) * sqrt(N) / (n + 1)`; a node is expanded again
  (progressive sampling) while its expansions <= ps_c * visits ** ps_alpha. Priors are
  `exp(logprob / prior_temperature)` (a tactic sampled twice in one expansion adds its prior); each
  edge has reward -1; with no value model (the default: `value = none`) a leaf's value is 0, a
  node with no legal tactic gets `no_actions_value` (and is sampled again when selected, as in
  nanoproof); values are backed up as reward + value; a child at `max_depth` is never selected.

Both: a tactic sampled several times in one expansion is applied once; a failed edge (Lean error,
timeout, refused) adds nothing; a child whose goals equal an ancestor's is a cycle, one whose goals
equal any other node's of this search a duplicate (best-first: dropped; MCTS: kept, only cycles are
dropped, as nanoproof does); a node at `max_depth` is not expanded. Not covered: nanoproof's AND nodes
(one OR node per goal list here: the REPL's proof states hold every goal), a value model.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any

from sgsbatch.config.schema import SearchConfig
from sgsbatch.search.environment import TacticResult


@dataclass
class Edge:
    """One distinct tactic of an expansion, applied: `logprob` is its sampled tokens' summed
    log-probability; `tokens` what the driver keeps to train on it (opaque here)."""

    tactic: str
    logprob: float
    result: TacticResult | None = None  # set once applied
    count: int = 1
    tokens: Any = None


@dataclass
class Node:
    id: int
    state: int | None
    goals: tuple[str, ...]
    parent: Node | None = None
    tactic: str | None = None
    path_logprob: float = 0.0
    depth: int = 0
    reward: float = 0.0
    prior: float = 0.0
    tokens: Any = None  # the Edge's tokens that created this node
    children: list[Node] = field(default_factory=list)
    expansions: int = 0
    visits: int = 0
    value_sum: float = 0.0

    @property
    def solved(self) -> bool:
        return self.parent is not None and not self.goals

    def value(self) -> float:
        return self.value_sum / self.visits if self.visits else 0.0

    def path(self) -> list[Node]:
        """The nodes from the root's first child down to this one (the tactics of a proof, in order)."""
        out: list[Node] = []
        node: Node | None = self
        while node is not None and node.parent is not None:
            out.append(node)
            node = node.parent
        return out[::-1]


@dataclass
class SearchStats:
    expansions: int = 0
    edges: int = 0  # distinct tactics applied
    failed_edges: int = 0
    duplicates: int = 0
    cycles: int = 0
    nodes: int = 1

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


class Search:
    """One proof search from a root proof state (see the module docstring)."""

    def __init__(self, root_state: int | None, root_goals: tuple[str, ...], cfg: SearchConfig) -> None:
        self.cfg = cfg
        self.root = Node(0, root_state, root_goals)
        self.stats = SearchStats()
        self.found: Node | None = None
        self._seen: dict[tuple[str, ...], int] = {root_goals: 0}
        self._open: list[tuple[float, int, Node]] = [(0.0, 0, self.root)]
        self._path: list[Node] = []

    @property
    def budget(self) -> int:
        """Expansions this search may make."""
        if self.cfg.algorithm == "mcts":
            return min(self.cfg.max_expansions, self.cfg.mcts_simulations)
        return self.cfg.max_expansions

    def over(self) -> bool:
        return self.found is not None or self.stats.expansions >= self.budget

    def next_node(self) -> Node | None:
        """The node to expand next; None when the search is over or nothing is left to expand."""
        if self.over():
            return None
        return self._next_mcts() if self.cfg.algorithm == "mcts" else self._next_best_first()

    def expand(self, node: Node, edges: list[Edge]) -> None:
        """Add `node`'s children from its expansion's applied tactics (distinct tactics, in sampled order)."""
        self.stats.expansions += 1
        node.expansions += 1
        for edge in edges:
            self.stats.edges += 1
            res = edge.result
            assert res is not None, "an edge is expanded once applied"
            if not res.ok:
                self.stats.failed_edges += 1
                continue
            if self._is_cycle(node, res.goals):
                self.stats.cycles += 1
                continue
            if res.goals and res.goals in self._seen and self.cfg.algorithm == "best_first":
                self.stats.duplicates += 1
                continue
            child = Node(self.stats.nodes, res.state, res.goals, parent=node, tactic=edge.tactic,
                         path_logprob=node.path_logprob + edge.logprob, depth=node.depth + 1, reward=-1.0,
                         prior=edge.count * math.exp(edge.logprob / self.cfg.mcts_prior_temperature),
                         tokens=edge.tokens)
            self.stats.nodes += 1
            node.children.append(child)
            self._seen.setdefault(res.goals, child.id)
            if child.solved:
                self.found = child
                return
            if self.cfg.algorithm == "best_first" and child.depth < self.cfg.max_depth:
                heapq.heappush(self._open, (-self._priority(child), child.id, child))
        if self.cfg.algorithm == "mcts":
            self._backpropagate(node)

    # best-first
    def _priority(self, node: Node) -> float:
        alpha = self.cfg.length_alpha
        return node.path_logprob / (node.depth ** alpha) if alpha and node.depth else node.path_logprob

    def _next_best_first(self) -> Node | None:
        if not self._open:
            return None
        return heapq.heappop(self._open)[2]

    # MCTS
    def _next_mcts(self) -> Node:
        node = self.root
        path = [node]
        while node.expansions and node.children and not self._progressive(node):
            open_ = [c for c in node.children if c.depth < self.cfg.max_depth]
            if not open_:
                break  # every child is at max_depth: sample this node again
            node = max(open_, key=lambda c: (self._ucb(path[-1], c), -c.id))
            path.append(node)
        self._path = path
        return node

    def _progressive(self, node: Node) -> bool:
        return node.expansions <= self.cfg.mcts_ps_c * node.visits ** self.cfg.mcts_ps_alpha

    def _ucb(self, parent: Node, child: Node) -> float:
        c = self.cfg
        pb_c = math.log((parent.visits + c.mcts_c_base + 1) / c.mcts_c_base) + c.mcts_c_init
        pb_c *= math.sqrt(parent.visits) / (child.visits + 1)
        priors = sum(x.prior for x in parent.children) or 1.0
        value_score = c.mcts_discount ** (-1 - (child.reward + child.value())) if child.visits else 0.0
        return pb_c * child.prior / priors + value_score

    def _backpropagate(self, leaf: Node) -> None:
        path = self._path if self._path and self._path[-1] is leaf else [*leaf.path()[:-1], leaf]
        if path[0] is not self.root:
            path = [self.root, *path]
        value = 0.0 if leaf.children else self.cfg.mcts_no_actions_value
        for node in reversed(path):
            node.value_sum += value
            node.visits += 1
            value = node.reward + value
        self._path = []

    def _is_cycle(self, node: Node, goals: tuple[str, ...]) -> bool:
        p: Node | None = node
        while p is not None:
            if p.goals == goals:
                return True
            p = p.parent
        return False
