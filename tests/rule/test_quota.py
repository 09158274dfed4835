"""The ElasticQuotaTree rules of docs/architecture.md section 4, as pure functions (no database)."""

from queues.quota import exceeds_max, rollup, shortfall, validate_tree

from ..support.trees import node, request, seed_like

# Invariants


def test_it_accepts_a_valid_tree():
    assert validate_tree(seed_like().values()) == []


def test_min_must_not_exceed_max_on_any_node():
    tree = seed_like()
    tree["root/algorithm/video"] = node("root/algorithm/video", {"cpu": 16}, {"cpu": 14}, ["video"])
    errors = validate_tree(tree.values())
    assert "root/algorithm/video: min cpu 16 is above max 14" in errors


def test_childrens_min_must_sum_within_the_parents_min():
    tree = seed_like()
    tree["root/algorithm/text"] = node("root/algorithm/text", {"cpu": 24}, {"cpu": 24}, ["text"])
    errors = validate_tree(tree.values())
    assert "root/algorithm: children's min cpu sum to 36, above its own min 32" in errors


def test_a_childs_max_must_not_exceed_its_parents_max():
    tree = seed_like()
    tree["root/algorithm/text"] = node("root/algorithm/text", {"cpu": 12}, {"cpu": 50}, ["text"])
    errors = validate_tree(tree.values())
    assert "root/algorithm/text: max cpu 50 is above its parent root/algorithm's max 48" in errors


def test_a_namespace_is_bound_to_at_most_one_leaf():
    tree = seed_like()
    tree["root/algorithm/text"] = node("root/algorithm/text", {"cpu": 12}, {"cpu": 24}, ["video"])
    errors = validate_tree(tree.values())
    assert "namespace video is bound to both root/algorithm/text and root/algorithm/video" in errors


def test_only_leaves_bind_namespaces():
    tree = seed_like()
    tree["root/algorithm"] = node("root/algorithm", {"cpu": 32}, {"cpu": 48}, ["algo"])
    errors = validate_tree(tree.values())
    assert any("root/algorithm: only leaves bind namespaces" in e for e in errors)


def test_the_tree_has_one_root_and_known_parents():
    errors = validate_tree([node("root"), node("other"), node("root/x/y")])
    assert "the tree must have exactly one root, found 2" in errors
    assert "root/x/y: parent root/x does not exist" in errors


# Admission of request R into leaf L


def test_a_request_fits_when_every_node_on_the_path_stays_within_max():
    tree = seed_like()
    assert (
        shortfall(
            leaf="root/algorithm/video",
            request=request(cpu=12),
            tree=tree,
            used={},
            allocatable=None,
        )
        is None
    )


def test_the_seeds_second_rayjob_waits_for_the_leafs_max():
    # video (min 12, max 14 cpu) using 12 cannot take the 12-cpu RayJob: 24 > 14.
    tree = seed_like()
    used = rollup({"root/algorithm/video": request(cpu=12)})
    reason = shortfall(
        leaf="root/algorithm/video", request=request(cpu=12), tree=tree, used=used, allocatable=None
    )
    assert reason.where == "root/algorithm/video"
    assert reason.message() == (
        "Insufficient quota in root/algorithm/video: cpu requested 12, free 2 (used 12 of max 14)"
    )


def test_a_leaf_may_borrow_its_siblings_idle_min():
    # text's min is 12, but it may run up to its max 24 while video leaves its min idle.
    tree = seed_like()
    used = rollup({"root/algorithm/text": request(cpu=12)})
    assert (
        shortfall(
            leaf="root/algorithm/text",
            request=request(cpu=12),
            tree=tree,
            used=used,
            allocatable=None,
        )
        is None
    )


def test_it_refuses_above_an_ancestors_max():
    # text (max 24) has room, but algorithm (max 48) is full with video and text usage.
    tree = seed_like()
    tree["root/algorithm/text"] = node("root/algorithm/text", {"cpu": 12}, {"cpu": 48}, ["text"])
    used = rollup({"root/algorithm/video": request(cpu=14), "root/algorithm/text": request(cpu=30)})
    reason = shortfall(
        leaf="root/algorithm/text", request=request(cpu=8), tree=tree, used=used, allocatable=None
    )
    assert reason.where == "root/algorithm"
    assert "used 44 of max 48" in reason.message()


def test_it_refuses_when_the_cluster_has_no_room():
    tree = seed_like()
    used = rollup({"root/interns/intern-video": request(cpu=56)})
    reason = shortfall(
        leaf="root/algorithm/video", request=request(cpu=8), tree=tree, used=used,
        allocatable=request(cpu=60),
    )  # fmt: skip
    assert reason.where == "cluster"
    assert reason.message() == (
        "Insufficient cluster capacity: cpu requested 8, free 4 (used 56 of allocatable 60)"
    )


def test_a_resource_missing_from_max_is_not_limited_there():
    tree = seed_like()
    assert (
        shortfall(
            leaf="root/interns/intern-video",
            request={"example.com/fpga": 3},
            tree=tree,
            used={},
            allocatable=None,
        )
        is None
    )


def test_a_request_above_a_max_can_never_be_admitted():
    reason = exceeds_max(leaf="root/algorithm/video", request=request(cpu=16), tree=seed_like())
    assert reason.where == "root/algorithm/video"


def test_usage_rolls_up_to_every_ancestor():
    used = rollup({"root/algorithm/video": request(cpu=4), "root/algorithm/text": request(cpu=2)})
    assert used["root/algorithm"] == {"cpu": 6000}
    assert used["root"] == {"cpu": 6000}
    assert used["root/algorithm/video"] == {"cpu": 4000}
