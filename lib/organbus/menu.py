# The menu of PROTOCOL.md section 8 and its plan_schema (JSON Schema 2020-12), built from live abilities.

PROTOCOL = 3
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
# Sub-schemas every action branch shares (one object each: the menu lives in a small heap).
_ID = {"type": "string", "minLength": 1, "maxLength": 15}
_PRIORITY = {"type": "integer", "minimum": 0, "maximum": 9}
_DEPENDS = {"type": "array", "items": _ID}
_STEP_KEYS = ["task_id", "action", "params", "priority", "depends_on"]


def menu_capability(cap, module_id):
    """One menu entry from a descriptor capability dict and the module_id that owns it."""
    return {
        "name": cap["name"],
        "description": cap["description"],
        "exec_type": cap["exec_type"],
        "resource_group": cap["resource_group"],
        "max_duration_ms": cap["max_duration_ms"],
        "module_id": module_id,
        "params": [
            {
                "name": p["name"],
                "type": p["type"],
                "min": p["min"],
                "max": p["max"],
                "unit": p["unit"],
            }
            for p in cap["params"]
        ],
    }


PARAM_TYPES = ("int", "float", "bool", "string")  # PROTOCOL.md section 4


def param_schema(p):
    """The JSON Schema of one descriptor param: the one mapping, for plan_schema and MCP tools.

    int -> integer, float -> number (both with the declared bounds), bool -> boolean, string ->
    string with the bounds as lengths; a non-empty unit becomes the description."""
    t = p["type"]
    if t == "string":
        # bounds are UTF-8 bytes on the wire; JSON Schema counts characters, and a character is
        # at least one byte, so a string the schema allows may still be cut by the organ
        s = {"type": "string", "minLength": p["min"], "maxLength": p["max"]}
    elif t == "bool":
        s = {"type": "boolean"}
    elif t == "int" or t == "float":
        s = {
            "type": "integer" if t == "int" else "number",
            "minimum": p["min"],
            "maximum": p["max"],
        }
    else:
        raise ValueError(
            "param %s: type %r is not a protocol type (%s)"
            % (p.get("name"), t, ", ".join(PARAM_TYPES))
        )
    if p.get("unit"):
        s["description"] = "unit: " + p["unit"]
    return s


def _step_schema(cap):
    names = [p["name"] for p in cap["params"]]
    props = {}
    for p in cap["params"]:
        props[p["name"]] = param_schema(p)
    return {
        "type": "object",
        "description": cap["description"],
        "properties": {
            "task_id": _ID,
            "action": {"type": "string", "enum": [cap["name"]]},
            "params": {
                "type": "object",
                "properties": props,
                "required": names,
                "additionalProperties": False,
            },
            "priority": _PRIORITY,
            "depends_on": _DEPENDS,
        },
        "required": _STEP_KEYS,
        "additionalProperties": False,
    }


def plan_schema(capabilities, max_steps=16):
    """A JSON Schema (draft 2020-12) of a valid plan for exactly these menu capabilities.

    Every object lists all its keys as required and forbids others, and each action is one
    branch of `anyOf`, so OpenAI strict structured output and Ollama's `format` take it as is."""
    steps = {"type": "array", "maxItems": max_steps}
    if capabilities:
        steps["items"] = {"anyOf": [_step_schema(c) for c in capabilities]}
    else:
        steps["maxItems"] = 0
        steps["items"] = {"type": "object"}
    return {
        "$schema": SCHEMA_DIALECT,
        "title": "organbus plan",
        "type": "object",
        "properties": {
            "heard_req": {"type": "integer"},
            "steps": steps,
            "can_execute": {"type": "boolean"},
            "missing": {"type": "array", "items": {"type": "string"}},
            "response": {"type": "string"},
        },
        "required": ["heard_req", "steps", "can_execute", "missing", "response"],
        "additionalProperties": False,
    }


def build_menu(capabilities, max_steps=16):
    """Section 8 menu from menu capability dicts (each with `module_id`), in the order given."""
    caps = [menu_capability(c, c["module_id"]) for c in capabilities]
    return {
        "protocol": PROTOCOL,
        "max_steps": max_steps,
        "capabilities": caps,
        "plan_schema": plan_schema(caps, max_steps),
    }
