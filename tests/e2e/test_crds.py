"""The CRDs users install are structural, self-consistent, and accept the shipped examples:
a quick static check that needs no cluster (no build, no kube-apiserver), so it runs first and
everywhere.

The authority is kube-apiserver itself: test_local_cel.py applies these CRDs and examples to the
real API server of modelfleet-local, which also checks what this file cannot (CEL rules, their
cost budget, list-map keys, formats).
"""
import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRDS = sorted((ROOT / "crds").glob("*.yaml"))
EXAMPLES = sorted((ROOT / "examples" / "k8s").glob("*.yaml"))


def load(path):
    return yaml.safe_load(path.read_text())


def schema_of(crd):
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def walk(node, path="$"):
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


def validate(value, schema, path="$"):
    """A small OpenAPI v3 validator for the keywords our CRDs use; returns a list of errors."""
    errors = []
    t = schema.get("type")
    kinds = {"object": dict, "array": list, "string": str, "boolean": bool}
    if t in kinds and not isinstance(value, kinds[t]):
        return [f"{path}: expected {t}"]
    if t == "integer" and (not isinstance(value, int) or isinstance(value, bool)):
        return [f"{path}: expected integer"]
    if t == "number" and (not isinstance(value, (int, float)) or isinstance(value, bool)):
        return [f"{path}: expected number"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{path}: below minimum")
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{path}: above maximum")
    if t == "object":
        if schema.get("x-kubernetes-preserve-unknown-fields") or path == "$.metadata":
            return errors  # ObjectMeta is validated by the API server itself, not by the CRD schema
        props = schema.get("properties", {})
        for req in schema.get("required", []):
            if req not in value:
                errors.append(f"{path}: missing required {req}")
        for key, child in value.items():
            if key in props:
                errors += validate(child, props[key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += validate(child, schema["additionalProperties"], f"{path}.{key}")
            elif path != "$" or key not in ("apiVersion", "kind", "metadata"):
                errors.append(f"{path}: unknown field {key}")
    if t == "array":
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: fewer than minItems")
        for i, item in enumerate(value):
            errors += validate(item, schema.get("items", {}), f"{path}[{i}]")
    return errors


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.name)
def test_schema_is_structural(path):
    crd = load(path)
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{crd['spec']['names']['plural']}.{crd['spec']['group']}"
    for where, node in walk(schema_of(crd)):
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), f"{where} has no type"
        if "default" in node:
            assert validate(node["default"], node, where) == [], f"{where}: default violates schema"


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.name)
def test_printer_columns_point_into_the_schema(path):
    crd = load(path)
    version = crd["spec"]["versions"][0]
    props = schema_of(crd)["properties"]
    for column in version["additionalPrinterColumns"]:
        parts = column["jsonPath"].lstrip(".").split(".")
        if parts[0] == "metadata":
            continue
        node = props[parts[0]]
        for part in parts[1:]:
            assert part in node.get("properties", {}), f"{column['name']}: {column['jsonPath']} not in schema"
            node = node["properties"][part]


def test_scale_subresource_paths_exist():
    crd = load(ROOT / "crds" / "modelfleet.io_modeldeployments.yaml")
    scale = crd["spec"]["versions"][0]["subresources"]["scale"]
    props = schema_of(crd)["properties"]
    assert "replicas" in props["spec"]["properties"]
    for key in ("statusReplicasPath", "labelSelectorPath"):
        assert scale[key].split(".")[-1] in props["status"]["properties"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_validate(path):
    obj = load(path)
    crds = {load(c)["spec"]["names"]["kind"]: load(c) for c in CRDS}
    assert validate(obj, schema_of(crds[obj["kind"]])) == []


def test_validator_rejects_bad_objects():
    crd = load(ROOT / "crds" / "modelfleet.io_modeldeployments.yaml")
    bad = load(EXAMPLES[0])
    bad["spec"]["replicas"] = -1
    bad["spec"]["versions"][0]["bogus"] = 1
    del bad["spec"]["versions"][1]["storageUri"]
    errors = validate(bad, schema_of(crd))
    assert any("below minimum" in e for e in errors)
    assert any("unknown field bogus" in e for e in errors)
    assert any("missing required storageUri" in e for e in errors)
