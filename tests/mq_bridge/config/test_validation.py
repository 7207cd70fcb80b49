"""Validation errors: every problem, with its dotted path and a hint where one helps."""

from __future__ import annotations

from typing import Any

import pytest

from mq_bridge.config.loader import load_endpoint, load_route, validate_document
from mq_bridge.errors import ConfigError

pytestmark = pytest.mark.usefixtures("fakes")


def route_problems(route: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_route(("config", {"routes": {"orders": route}}), "orders")
    return caught.value.problems


def one_problem(route: dict[str, Any]) -> str:
    problems = route_problems(route)
    assert len(problems) == 1, problems
    return problems[0]


def test_bound_violation_names_the_path_the_limit_and_the_value() -> None:
    problem = one_problem({"input": {"source": {"queue": "q", "prefetch": 0}}})
    assert problem == "routes.orders.input.source.prefetch: must be >= 1, got 0"


def test_mistyped_option_suggests_the_closest_one() -> None:
    problem = one_problem({"input": {"source": {"queue": "q", "prefech": 5}}})
    assert problem == "routes.orders.input.source.prefech: unknown option; did you mean 'prefetch'?"


def test_unrelated_option_lists_the_allowed_ones() -> None:
    problem = one_problem({"input": {"source": {"queue": "q", "zzz": 5}}})
    assert problem.startswith("routes.orders.input.source.zzz: unknown option; expected one of:")
    assert "durable, password, prefetch, queue, ratio" in problem


def test_route_option_typo() -> None:
    problem = one_problem({"input": {"source": {"queue": "q"}}, "batchsize": 5})
    assert problem == "routes.orders.batchsize: unknown option; did you mean 'batch_size'?"


def test_unknown_endpoint_with_suggestion() -> None:
    problem = one_problem({"input": {"sourc": {"queue": "q"}}})
    assert problem == "routes.orders.input.sourc: unknown endpoint; did you mean 'source'?"


def test_output_only_endpoint_as_input_and_input_only_as_output() -> None:
    problems = route_problems({"input": {"sink": {}}, "output": {"source": {"queue": "q"}}})
    assert problems == [
        "routes.orders.input.sink: the sink endpoint cannot be used as an input "
        "(it is output-only)",
        "routes.orders.output.source: the source endpoint cannot be used as an output "
        "(it is input-only)",
    ]


def test_endpoint_needs_exactly_one_key() -> None:
    problems = route_problems({"input": {"source": {"queue": "q"}, "both": {}}, "output": {}})
    assert "routes.orders.input: more than one endpoint given (source, both); use exactly one" in (
        problems
    )
    assert any(
        p.startswith("routes.orders.output: no endpoint given; expected one of:") for p in problems
    )


def test_missing_required_option_and_missing_input() -> None:
    assert one_problem({"input": {"source": {}}}) == (
        "routes.orders.input.source.queue: required option is missing"
    )
    assert one_problem({"output": {"sink": {}}}) == (
        "routes.orders.input: required option is missing"
    )


def test_type_errors_read_naturally() -> None:
    problems = route_problems(
        {
            "input": {"source": {"queue": "q", "durable": "yes", "ratio": "half"}},
            "batch_size": "many",
        }
    )
    assert problems == [
        "routes.orders.batch_size: must be an integer, got 'many'",
        "routes.orders.input.source.durable: must be true or false, got 'yes'",
        "routes.orders.input.source.ratio: must be a number, got 'half'",
    ]


def test_enum_with_suggestion() -> None:
    problem = one_problem({"input": {"both": {}}, "output": {"sink": {"mode": "apend"}}})
    assert problem == (
        "routes.orders.output.sink.mode: must be one of 'append', 'replace', got 'apend'; "
        "did you mean 'append'?"
    )


def test_middleware_problems_are_indexed() -> None:
    problems = route_problems(
        {
            "input": {"both": {}, "middlewares": [{"stamp": {}}, {"guard": {"limit": -1}}]},
            "output": {"both": {}, "middlewares": [{"stmp": {}}, "retry", {"stamp": {"lable": 1}}]},
        }
    )
    assert problems == [
        "routes.orders.input.middlewares[0].stamp: the stamp middleware cannot be used as an "
        "input (it is output-only)",
        "routes.orders.input.middlewares[1].guard.limit: must be >= 0, got -1",
        "routes.orders.output.middlewares[0].stmp: unknown middleware; did you mean 'stamp'?",
        "routes.orders.output.middlewares[1]: each middleware is a mapping with one key, "
        "e.g. {retry: {...}}",
        "routes.orders.output.middlewares[2].stamp.lable: unknown option; did you mean 'label'?",
    ]


def test_nested_endpoints_are_checked_as_outputs_with_their_path() -> None:
    output = {"sink": {"copies": [{"both": {}}, {"source": {"queue": "q"}}, {"bth": {}}]}}
    problems = route_problems({"input": {"both": {}}, "output": output})
    assert problems == [
        "routes.orders.output.sink.copies[1].source: the source endpoint cannot be used as an "
        "output (it is input-only)",
        "routes.orders.output.sink.copies[2].bth: unknown endpoint; did you mean 'both'?",
    ]


def test_the_message_lists_every_problem() -> None:
    with pytest.raises(ConfigError) as caught:
        load_route(
            ("config", {"input": {"source": {"queue": "", "prefetch": 0}}, "concurrency": 0}), None
        )
    message = str(caught.value)
    assert message.startswith("3 problems:\n")
    assert "  concurrency: must be >= 1, got 0" in message
    assert "  input.source.queue: must not be empty" in message
    assert "  input.source.prefetch: must be >= 1, got 0" in message
    assert caught.value.path == "concurrency"


def test_secret_values_never_appear_in_errors() -> None:
    problem = one_problem({"input": {"source": {"queue": "q", "password": 123456789}}})
    assert problem == "routes.orders.input.source.password: must be a string or null, got <hidden>"
    problem = one_problem({"input": {"source": {"queue": "q", "prefetch": "amqp://u:hunter2@h"}}})
    assert "hunter2" not in problem
    assert "amqp://u:***@h" in problem


def test_endpoint_defaults_and_nested_defaults_are_filled() -> None:
    route = load_route(
        (
            "config",
            {
                "input": {"source": {"queue": "q"}, "middlewares": [{"guard": None}]},
                "output": {"sink": {"copies": [{"both": None, "middlewares": [{"stamp": {}}]}]}},
            },
        ),
        None,
    )
    assert route["input"]["source"] == {
        "queue": "q",
        "prefetch": 10,
        "durable": True,
        "ratio": 0.5,
    }
    assert route["input"]["middlewares"] == [{"guard": {"limit": 3}}]
    copy = route["output"]["sink"]["copies"][0]
    assert copy == {"both": {}, "middlewares": [{"stamp": {"label": "x"}}]}
    assert route["output"]["sink"]["mode"] == "append"


def test_endpoint_role_is_checked_for_consumers_and_publishers() -> None:
    with pytest.raises(ConfigError, match="the sink endpoint cannot be used as an input"):
        load_endpoint(("config", {"sink": {}}), None, "consumers", "input")
    with pytest.raises(ConfigError, match=r"^consumers.c.source.queue: required option is missing"):
        load_endpoint(("config", {"consumers": {"c": {"source": {}}}}), "c", "consumers", "input")


def test_random_panic_needs_allow_fault_injection() -> None:
    route = {"input": {"both": {}}, "output": {"both": {}, "middlewares": [{"random_panic": {}}]}}
    problems = route_problems(route)
    assert "routes.orders.output.middlewares[0].random_panic: needs " in problems[-1]
    load_route(("config", {**route, "allow_fault_injection": True}), None)


def test_other_entries_do_not_block_loading_but_validate_document_finds_them() -> None:
    doc = {
        "routes": {
            "good": {"input": {"both": {}}},
            "bad": {"input": {"both": {}}, "batch_size": 0},
        },
        "publishers": {"p": {"source": {"queue": "q"}}},
        "consumers": {"c": {"sink": {}}},
    }
    assert load_route(("config", doc), "good")["name"] == "good"
    assert validate_document(("config", doc)) == [
        "routes.bad.batch_size: must be >= 1, got 0",
        "publishers.p.source: the source endpoint cannot be used as an output (it is input-only)",
        "consumers.c.sink: the sink endpoint cannot be used as an input (it is output-only)",
    ]
    assert validate_document(("config", {"input": {"both": {}}})) == []


def test_alternatives_report_the_branch_that_fits_the_value() -> None:
    problems = route_problems(
        {
            "input": {"both": {}},
            "output": {"sink": {"fallback": {"bth": {}}, "label": {"txt": "x"}}},
        }
    )
    assert problems == [
        "routes.orders.output.sink.fallback.bth: unknown endpoint; did you mean 'both'?",
        "routes.orders.output.sink.label.text: required option is missing",
        "routes.orders.output.sink.label.txt: unknown option; did you mean 'text'?",
    ]
    assert one_problem({"input": {"both": {}}, "output": {"sink": {"label": 5}}}) == (
        "routes.orders.output.sink.label: must be a string, a mapping or null, got 5"
    )


def test_an_optional_nested_endpoint_gets_its_defaults() -> None:
    route = load_route(
        ("config", {"input": {"both": {}}, "output": {"sink": {"fallback": {"both": {}}}}}), None
    )
    assert route["output"]["sink"]["fallback"] == {"both": {}, "middlewares": []}
