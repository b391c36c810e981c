"""A route's JSON body as its pydantic model, validated from the bytes in one step.

FastAPI reads a body parameter as ``json.loads`` and then validates the Python objects; pydantic's
``model_validate_json`` does both in Rust. For ``Content-Type: application/json`` that is tried first.
Any body it refuses is read again as FastAPI reads it (the content type's rules, ``json.loads``,
validation from the Python objects, FastAPI's error shapes with ``"body"`` in front of each location),
so a refused body raises the same ``RequestValidationError`` or ``HTTPException`` as a FastAPI body
parameter would, and the gateway's handlers word it as before. ``tests/gateway/test_body.py`` sends the
same bad bodies to both and compares the answers.
"""

from __future__ import annotations

import email.message
import json
import re
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from fastapi import HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)
#: The content type the fast path takes as is; any other (parameters, ``+json``) is read FastAPI's way.
JSON = "application/json"
_NOTHING = object()


def json_request_body(model: type[BaseModel]) -> dict[str, Any]:
    """The route's OpenAPI ``requestBody`` (``openapi_extra``), as FastAPI writes it for a body parameter."""
    return {"content": {JSON: {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}, "required": True}


async def read_body(request: Request, model: type[M]) -> M:
    """The request's body as ``model``; a body refused raises what FastAPI's body parameter raises."""
    raw = await request.body()
    if raw and request.headers.get("content-type") == JSON:
        try:
            return model.model_validate_json(raw)
        except ValidationError:
            pass  # worded FastAPI's way below (a body Python's json reads, NaN say, may still be valid there)
    return _as_fastapi_reads(raw, request.headers.get("content-type"), model)


def _as_fastapi_reads(raw: bytes, content_type: str | None, model: type[M]) -> M:
    """FastAPI's ``get_request_handler`` and ``request_body_to_args`` for one required, non-embedded model
    (strict content type, its default): what it parses, and the errors it raises."""
    body: Any = _NOTHING
    if raw:
        body = raw
        if content_type and _is_json(content_type):
            try:
                body = json.loads(raw, parse_int=_int)
            except json.JSONDecodeError as e:
                raise RequestValidationError([{"type": "json_invalid", "loc": ("body", e.pos), "msg": "JSON decode "
                                               "error", "input": {}, "ctx": {"error": e.msg}}], body=e.doc) from e
            except Exception as e:  # noqa: BLE001 - as FastAPI: not UTF-8, nested too deep
                raise HTTPException(status_code=400, detail="There was an error parsing the body") from e
    if body is not _NOTHING:
        _refuse_long_numbers(body)
    if body is _NOTHING:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required",
                                       "input": None}], body=None)
    try:
        return model.model_validate(body, from_attributes=True)
    except ValidationError as e:
        errors = [{**err, "loc": ("body", *err.get("loc", ()))} for err in e.errors(include_url=False)]
        raise RequestValidationError(errors, body=body) from None


class _LongNumber(str):
    """An integer of more digits than Python converts (``sys.get_int_max_str_digits()``, 4,300 by default), as
    its text: ``json.loads`` would raise a ValueError with no field in it (a 400 for the whole body)."""


def _int(text: str) -> int | _LongNumber:
    limit = sys.get_int_max_str_digits()
    return _LongNumber(text) if limit and len(text.lstrip("-")) > limit else int(text)


def _refuse_long_numbers(body: Any) -> None:
    """A RequestValidationError (422) naming the field of the first integer too long to convert, if any."""
    todo: list[tuple[tuple[Any, ...], Any]] = [((), body)]
    while todo:  # not recursive: a body nested as deep as the decoder takes stays off the stack
        path, value = todo.pop()
        if isinstance(value, _LongNumber):
            limit = sys.get_int_max_str_digits()
            raise RequestValidationError([{"type": "int_too_long", "loc": ("body", *path), "input": value[:20] + "...",
                                           "msg": f"a number of {len(value.lstrip('-')):,} digits; at most "
                                                  f"{limit:,} are read"}], body=None)
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        todo.extend(reversed([((*path, key), item) for key, item in items]))


def refuse_long_numbers_in(raw: bytes) -> None:
    """For a route whose body FastAPI parses (its ``json.loads`` raises a ValueError on an integer of more digits
    than Python converts, which FastAPI answers 400 with no field): the 422 naming that integer's field, or
    nothing (a body without such a run of digits is not parsed here)."""
    limit = sys.get_int_max_str_digits()
    if not limit or not re.search(rb"\d{%d}" % (limit + 1), raw):
        return
    try:
        body = json.loads(raw, parse_int=_int)
    except Exception:  # noqa: BLE001 - not JSON: FastAPI words it
        return
    _refuse_long_numbers(body)


class LongNumbersRoute(APIRoute):
    """FastAPI's route with the body's over-long integers answered 422 naming their field before FastAPI parses
    it (:func:`refuse_long_numbers_in`; FastAPI's documented custom ``APIRoute`` class)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            refuse_long_numbers_in(await request.body())
            return await handler(request)

        return checked


def _is_json(content_type: str) -> bool:
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))
