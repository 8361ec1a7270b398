#!/usr/bin/python3
"""Generates builtin_schemas.json: the OpenAPI v3 component schemas of the built-in kinds that
modelfleet-local serves, named as kube-apiserver names them (io.k8s.api.apps.v1.DeploymentSpec),
with $ref between them, descriptions, required fields and x-kubernetes-group-version-kind on the
top-level kinds.

The source is Debian's python3-kubernetes (kubernetes.client.models): every model class carries
openapi_types (python attribute -> type), attribute_map (python attribute -> JSON name), property
docstrings (the field descriptions) and setters that reject None for required fields. That client
(22.x) describes Kubernetes 1.22; the fields added since, up to the 1.32 the local server reports,
are listed in SUPPLEMENT below so that manifests using them (x-kubernetes-validations in CRDs, gRPC
probes, sidecar restartPolicy, ...) still pass strict field validation.

Usage: gen_builtin_schemas.py [OUTPUT]   (stdout when OUTPUT is omitted). The output is
deterministic; a ctest compares it with the committed file.
"""

import inspect
import json
import re
import sys

import kubernetes.client.models as models

REF = "#/components/schemas/"

# The served kinds, by group (order matters: a model reached first from a group's kinds belongs to
# that group). PodTemplate is not served; it is a root only so that PodTemplateSpec is named core.
GROUPS = [
    ("", "io.k8s.api.core.v1", ["Namespace", "Pod", "Service", "Endpoints", "ConfigMap", "Secret",
                                "ServiceAccount", "CoreV1Event:Event", "PersistentVolumeClaim", "Node"],
     ["PodTemplate"]),
    ("apps", "io.k8s.api.apps.v1", ["Deployment", "ReplicaSet"], []),
    ("discovery.k8s.io", "io.k8s.api.discovery.v1", ["EndpointSlice"], []),
    ("coordination.k8s.io", "io.k8s.api.coordination.v1", ["Lease"], []),
    ("rbac.authorization.k8s.io", "io.k8s.api.rbac.v1", ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"], []),
    ("apiextensions.k8s.io", "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1", ["CustomResourceDefinition"], []),
]
META = "io.k8s.apimachinery.pkg.apis.meta.v1"
META_MODELS = {"ObjectMeta", "ListMeta", "OwnerReference", "ManagedFieldsEntry", "LabelSelector",
               "LabelSelectorRequirement", "Condition", "Status", "StatusDetails", "StatusCause"}
# Models whose name changed after 1.22.
RENAMES = {"Handler": "LifecycleHandler"}

INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
# Fields the client types as `object` (or as strings) that kube-apiserver types more precisely.
FIELD_TYPES = {
    ("ServicePort", "targetPort"): INT_OR_STRING,
    ("RollingUpdateDeployment", "maxSurge"): INT_OR_STRING,
    ("RollingUpdateDeployment", "maxUnavailable"): INT_OR_STRING,
    ("HTTPGetAction", "port"): INT_OR_STRING,
    ("TCPSocketAction", "port"): INT_OR_STRING,
    ("ResourceRequirements", "limits"): {"map": QUANTITY},
    ("ResourceRequirements", "requests"): {"map": QUANTITY},
    ("ResourceFieldSelector", "divisor"): QUANTITY,
    ("EmptyDirVolumeSource", "sizeLimit"): QUANTITY,
    ("PodSpec", "overhead"): {"map": QUANTITY},
    ("PersistentVolumeClaimStatus", "capacity"): {"map": QUANTITY},
    ("NodeStatus", "capacity"): {"map": QUANTITY},
    ("NodeStatus", "allocatable"): {"map": QUANTITY},
}
# List semantics kube-apiserver's schemas carry and the client does not (merge keys for patches).
EXTENSIONS = {
    ("ObjectMeta", "finalizers"): {"x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
    ("ObjectMeta", "ownerReferences"): {"x-kubernetes-list-map-keys": ["uid"], "x-kubernetes-list-type": "map",
                                        "x-kubernetes-patch-merge-key": "uid", "x-kubernetes-patch-strategy": "merge"},
}
OPAQUE_DESCRIPTIONS = {
    INT_OR_STRING: ("IntOrString is a type that can hold an int32 or a string. When used in JSON or YAML marshalling "
                    "and unmarshalling, it produces or consumes the inner type.",
                    {"type": "string", "format": "int-or-string", "x-kubernetes-int-or-string": True}),
    QUANTITY: ("Quantity is a fixed-point representation of a number, serialized as a string such as \"100m\", "
               "\"1Gi\" or \"2\" (a plain number is accepted too).", {"type": "string"}),
}

# Fields Kubernetes added between 1.23 and 1.32 (the client knows 1.22): model -> JSON name ->
# (type, description). Types use the client's notation; a name in SUPPLEMENT_MODELS is a new model.
SUPPLEMENT = {
    "V1JSONSchemaProps": {"x-kubernetes-validations": ("list[V1ValidationRule]", "x-kubernetes-validations describes a list of validation rules written in the CEL expression language.")},
    "V1CustomResourceDefinitionVersion": {"selectableFields": ("list[V1SelectableField]", "selectableFields specifies paths to fields that may be used as field selectors.")},
    "V1PodSpec": {
        "os": ("V1PodOS", "Specifies the OS of the containers in the pod."),
        "hostUsers": ("bool", "Use the host's user namespace. Optional: Default to true."),
        "schedulingGates": ("list[V1PodSchedulingGate]", "SchedulingGates is an opaque list of values that if specified will block scheduling the pod."),
        "resourceClaims": ("list[V1PodResourceClaim]", "ResourceClaims defines which ResourceClaims must be allocated and reserved before the Pod is allowed to start."),
        "resources": ("V1ResourceRequirements", "Resources is the total amount of CPU and Memory resources required by all containers in the pod."),
    },
    "V1Container": {
        "resizePolicy": ("list[V1ContainerResizePolicy]", "Resources resize policy for the container."),
        "restartPolicy": ("str", "RestartPolicy defines the restart behavior of individual containers in a pod. Only \"Always\" is supported, for init containers (sidecars)."),
    },
    "V1ResourceRequirements": {"claims": ("list[V1ResourceClaim]", "Claims lists the names of resources, defined in spec.resourceClaims, that are used by this container.")},
    "V1Probe": {"grpc": ("V1GRPCAction", "GRPC specifies a GRPC HealthCheckRequest.")},
    "V1Handler": {"sleep": ("V1SleepAction", "Sleep represents a duration that the container should sleep.")},
    "V1PodSecurityContext": {
        "appArmorProfile": ("V1AppArmorProfile", "appArmorProfile is the AppArmor options to use by the containers in this pod."),
        "supplementalGroupsPolicy": ("str", "Defines how supplemental groups of the first container processes are calculated."),
        "seLinuxChangePolicy": ("str", "seLinuxChangePolicy defines how the container's SELinux label is applied to all volumes used by the Pod."),
    },
    "V1SecurityContext": {"appArmorProfile": ("V1AppArmorProfile", "appArmorProfile is the AppArmor options to use by this container.")},
    "V1VolumeMount": {"recursiveReadOnly": ("str", "RecursiveReadOnly specifies whether read-only mounts should be handled recursively.")},
    "V1Volume": {"image": ("V1ImageVolumeSource", "image represents an OCI object (a container image or artifact) pulled and mounted on the kubelet's host machine.")},
    "V1TopologySpreadConstraint": {
        "matchLabelKeys": ("list[str]", "MatchLabelKeys is a set of pod label keys to select the pods over which spreading will be calculated."),
        "minDomains": ("int", "MinDomains indicates a minimum number of eligible domains."),
        "nodeAffinityPolicy": ("str", "NodeAffinityPolicy indicates how we will treat Pod's nodeAffinity/nodeSelector when calculating pod topology spread skew."),
        "nodeTaintsPolicy": ("str", "NodeTaintsPolicy indicates how we will treat node taints when calculating pod topology spread skew."),
    },
    "V1PodAffinityTerm": {
        "matchLabelKeys": ("list[str]", "MatchLabelKeys is a set of pod label keys to select which pods will be taken into consideration."),
        "mismatchLabelKeys": ("list[str]", "MismatchLabelKeys is a set of pod label keys to select which pods will be taken into consideration."),
    },
    "V1ServiceSpec": {"trafficDistribution": ("str", "TrafficDistribution offers a way to express preferences for how traffic is distributed to Service endpoints.")},
    "V1LoadBalancerIngress": {"ipMode": ("str", "IPMode specifies how the load-balancer IP behaves, and may only be specified when the ip field is specified.")},
    "V1PersistentVolumeClaimSpec": {"volumeAttributesClassName": ("str", "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim.")},
    "V1PodStatus": {
        "hostIPs": ("list[V1HostIP]", "hostIPs holds the IP addresses allocated to the host."),
        "resize": ("str", "Status of resources resize desired for pod's containers."),
    },
    "V1ContainerStatus": {
        "allocatedResources": ("dict(str, str)", "AllocatedResources represents the compute resources allocated for this container by the node."),
        "resources": ("V1ResourceRequirements", "Resources represents the compute resource requests and limits that have been successfully enacted on the running container."),
    },
    "V1LeaseSpec": {
        "preferredHolder": ("str", "PreferredHolder signals to a lease holder that the lease has a more optimal holder and should be given up."),
        "strategy": ("str", "Strategy indicates the strategy for picking the leader for coordinated leader election."),
    },
}
SUPPLEMENT_MODELS = {
    "V1ValidationRule": ({
        "rule": ("str", "Rule represents the expression which will be evaluated by CEL."),
        "message": ("str", "Message represents the message displayed when validation fails."),
        "messageExpression": ("str", "MessageExpression declares a CEL expression that evaluates to the validation failure message."),
        "reason": ("str", "reason provides a machine-readable validation failure reason."),
        "fieldPath": ("str", "fieldPath represents the field path returned when the validation fails."),
        "optionalOldSelf": ("bool", "optionalOldSelf is used to opt a transition rule into evaluation even when the object is first created."),
    }, ["rule"], "ValidationRule describes a validation rule written in the CEL expression language."),
    "V1SelectableField": ({"jsonPath": ("str", "jsonPath is a simple JSON path which is evaluated against each custom resource to produce a field selector value.")},
                          ["jsonPath"], "SelectableField specifies the JSON path of a field that may be used with field selectors."),
    "V1PodOS": ({"name": ("str", "Name is the name of the operating system. The currently supported values are linux and windows.")},
                ["name"], "PodOS defines the OS parameters of a pod."),
    "V1PodSchedulingGate": ({"name": ("str", "Name of the scheduling gate.")}, ["name"],
                            "PodSchedulingGate is associated to a Pod to guard its scheduling."),
    "V1PodResourceClaim": ({
        "name": ("str", "Name uniquely identifies this resource claim inside the pod."),
        "resourceClaimName": ("str", "ResourceClaimName is the name of a ResourceClaim object in the same namespace as this pod."),
        "resourceClaimTemplateName": ("str", "ResourceClaimTemplateName is the name of a ResourceClaimTemplate object in the same namespace as this pod."),
    }, ["name"], "PodResourceClaim references exactly one ResourceClaim."),
    "V1ResourceClaim": ({
        "name": ("str", "Name must match the name of one entry in pod.spec.resourceClaims of the Pod where this field is used."),
        "request": ("str", "Request is the name chosen for a request in the referenced claim."),
    }, ["name"], "ResourceClaim references one entry in PodSpec.ResourceClaims."),
    "V1ContainerResizePolicy": ({
        "resourceName": ("str", "Name of the resource to which this resource resize policy applies. Supported values: cpu, memory."),
        "restartPolicy": ("str", "Restart policy to apply when specified resource is resized."),
    }, ["resourceName", "restartPolicy"], "ContainerResizePolicy represents resource resize policy for the container."),
    "V1GRPCAction": ({
        "port": ("int", "Port number of the gRPC service. Number must be in the range 1 to 65535."),
        "service": ("str", "Service is the name of the service to place in the gRPC HealthCheckRequest."),
    }, ["port"], "GRPCAction specifies an action involving a GRPC service."),
    "V1SleepAction": ({"seconds": ("int", "Seconds is the number of seconds to sleep.")}, ["seconds"],
                      "SleepAction describes a \"sleep\" action."),
    "V1AppArmorProfile": ({
        "type": ("str", "type indicates which kind of AppArmor profile will be applied. Valid options are: Localhost, RuntimeDefault, Unconfined."),
        "localhostProfile": ("str", "localhostProfile indicates a profile loaded on the node that should be used."),
    }, ["type"], "AppArmorProfile defines a pod or container's AppArmor settings."),
    "V1ImageVolumeSource": ({
        "reference": ("str", "Required: Image or artifact reference to be used."),
        "pullPolicy": ("str", "Policy for pulling OCI objects. Possible values are: Always, Never, IfNotPresent."),
    }, [], "ImageVolumeSource represents a image volume resource."),
    "V1HostIP": ({"ip": ("str", "IP is the IP address assigned to the host")}, ["ip"],
                 "HostIP represents a single IP address allocated to the host."),
}

# kube-apiserver's descriptions of the served kinds (the client has no class descriptions).
KIND_DESCRIPTIONS = {
    "Namespace": "Namespace provides a scope for Names. Use of multiple namespaces is optional.",
    "Pod": "Pod is a collection of containers that can run on a host. This resource is created by clients and scheduled onto hosts.",
    "Service": "Service is a named abstraction of software service (for example, mysql) consisting of local port (for example 3306) that the proxy listens on, and the selector that determines which pods will answer requests sent through the proxy.",
    "Endpoints": "Endpoints is a collection of endpoints that implement the actual service.",
    "ConfigMap": "ConfigMap holds configuration data for pods to consume.",
    "Secret": "Secret holds secret data of a certain type. The total bytes of the values in the Data field must be less than MaxSecretSize bytes.",
    "ServiceAccount": "ServiceAccount binds together: * a name, understood by users, and perhaps by peripheral systems, for an identity * a principal that can be authenticated and authorized * a set of secrets",
    "Event": "Event is a report of an event somewhere in the cluster.",
    "PersistentVolumeClaim": "PersistentVolumeClaim is a user's request for and claim to a persistent volume",
    "Node": "Node is a worker node in Kubernetes. Each node will have a unique identifier in the cache (i.e. in etcd).",
    "Deployment": "Deployment enables declarative updates for Pods and ReplicaSets.",
    "ReplicaSet": "ReplicaSet ensures that a specified number of pod replicas are running at any given time.",
    "EndpointSlice": "EndpointSlice represents a subset of the endpoints that implement a service.",
    "Lease": "Lease defines a lease concept.",
    "Role": "Role is a namespaced, logical grouping of PolicyRules that can be referenced as a unit by a RoleBinding.",
    "RoleBinding": "RoleBinding references a role, but does not contain it. It can reference a Role in the same namespace or a ClusterRole in the global namespace.",
    "ClusterRole": "ClusterRole is a cluster level, logical grouping of PolicyRules that can be referenced as a unit by a RoleBinding or ClusterRoleBinding.",
    "ClusterRoleBinding": "ClusterRoleBinding references a ClusterRole, but not contain it. It can reference a ClusterRole in the global namespace, and adds who information via Subject.",
    "CustomResourceDefinition": "CustomResourceDefinition represents a resource that should be exposed on the API server. Its name MUST be in the format <.spec.name>.<.spec.group>.",
}

PRIMITIVES = {
    "str": {"type": "string"},
    "int": {"type": "integer", "format": "int32"},
    "float": {"type": "number", "format": "double"},
    "bool": {"type": "boolean"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    # Arbitrary JSON (RawExtension, FieldsV1, JSON): any content is accepted.
    "object": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
}


def bare_name(model):
    """V1DeploymentSpec -> DeploymentSpec; CoreV1EndpointPort -> EndpointPort."""
    m = re.match(r"^(?:[A-Z][a-z]+)?V1(.+)$", model)
    if not m:
        raise SystemExit(f"unexpected model name {model}")
    name = m.group(1)
    return RENAMES.get(name, name)


def fields_of(model):
    """[(json_name, client_type, description)] and the required JSON names of a model."""
    if model in SUPPLEMENT_MODELS:
        props, required, _ = SUPPLEMENT_MODELS[model]
        return [(k, t, d) for k, (t, d) in props.items()], list(required)
    cls = getattr(models, model)
    out = []
    required = []
    for attr, client_type in cls.openapi_types.items():
        json_name = cls.attribute_map[attr]
        prop = getattr(cls, attr)
        out.append((json_name, client_type, property_description(prop)))
        if prop.fset and "must not be `None`" in inspect.getsource(prop.fset):
            required.append(json_name)
    for json_name, (client_type, description) in SUPPLEMENT.get(model, {}).items():
        out.append((json_name, client_type, description))
    return out, required


def property_description(prop):
    """The middle paragraph of a generated getter's docstring."""
    doc = inspect.getdoc(prop) or ""
    paragraphs = [p.strip() for p in doc.split("\n\n")]
    texts = [p for p in paragraphs[1:] if p and not p.startswith(":return:") and not p.startswith(":rtype:")]
    text = " ".join(texts).replace("  # noqa: E501", "").strip()
    return re.sub(r"\s+", " ", text)


def referenced_models(client_type):
    return re.findall(r"\b((?:[A-Z][a-z]+)?V1[A-Za-z0-9]+)\b", client_type)


class Generator:
    def __init__(self):
        self.owner = {}  # model -> schema name prefix
        self.schemas = {}

    def assign_owners(self):
        for _, prefix, kinds, extra_roots in GROUPS:
            roots = [k.split(":")[0] for k in kinds] + extra_roots
            queue = [r if r.startswith(("V1", "CoreV1")) else "V1" + r for r in roots]
            queue += [m + "List" for m in queue if hasattr(models, m + "List")]
            while queue:
                model = queue.pop(0)
                if model in self.owner:
                    continue
                self.owner[model] = META if bare_name(model) in META_MODELS else prefix
                for _, client_type, _ in fields_of(model)[0]:
                    queue.extend(referenced_models(client_type))

    def name(self, model):
        return self.owner[model] + "." + bare_name(model)

    def property_schema(self, owner_model, json_name, client_type, description):
        override = FIELD_TYPES.get((bare_name(owner_model), json_name))
        if isinstance(override, dict):
            schema = {"type": "object", "additionalProperties": self.ref_schema(override["map"])}
        elif override:
            schema = self.ref_schema(override)
        else:
            schema = self.type_schema(client_type)
        schema.update(EXTENSIONS.get((bare_name(owner_model), json_name), {}))
        if description:
            if "$ref" in schema:
                schema = {"allOf": [schema]}
            schema["description"] = description
        return schema

    def ref_schema(self, name):
        if name in OPAQUE_DESCRIPTIONS and name not in self.schemas:
            description, schema = OPAQUE_DESCRIPTIONS[name]
            self.schemas[name] = dict(schema, description=description)
        return {"$ref": REF + name}

    def type_schema(self, client_type):
        if client_type in PRIMITIVES:
            return dict(PRIMITIVES[client_type])
        m = re.match(r"^list\[(.+)\]$", client_type)
        if m:
            return {"type": "array", "items": self.type_schema(m.group(1))}
        m = re.match(r"^dict\(str, (.+)\)$", client_type)
        if m:
            return {"type": "object", "additionalProperties": self.type_schema(m.group(1))}
        if client_type in self.owner:
            return self.ref_schema(self.name(client_type))
        raise SystemExit(f"unknown client type {client_type}")

    def model_schema(self, model):
        fields, required = fields_of(model)
        properties = {}
        for json_name, client_type, description in sorted(fields):
            properties[json_name] = self.property_schema(model, json_name, client_type, description)
        schema = {"type": "object", "properties": properties}
        if required:
            schema["required"] = sorted(required)
        if model in SUPPLEMENT_MODELS:
            schema["description"] = SUPPLEMENT_MODELS[model][2]
        return schema

    def run(self):
        self.assign_owners()
        for model in sorted(self.owner):
            self.schemas[self.name(model)] = self.model_schema(model)
        # A model's description: the first description of a field that refers to it (the client
        # has no class descriptions), so `kubectl explain deployment.spec` has a DESCRIPTION.
        for name in sorted(self.schemas):
            for prop_name, prop in sorted(self.schemas[name].get("properties", {}).items()):
                target = prop.get("allOf", [prop.get("items", prop)])[0].get("$ref") or prop.get("items", {}).get("$ref")
                if target and "description" in prop:
                    target_schema = self.schemas[target[len(REF):]]
                    target_schema.setdefault("description", prop["description"])
        for group, _, kinds, _ in GROUPS:
            for entry in kinds:
                model, _, kind = entry.partition(":")
                model = model if model.startswith("CoreV1") else "V1" + model
                kind = kind or bare_name(model)
                self.schemas[self.name(model)]["description"] = KIND_DESCRIPTIONS[kind]
                self.schemas[self.name(model)]["x-kubernetes-group-version-kind"] = [
                    {"group": group, "kind": kind, "version": "v1"}]
                list_model = model + "List"
                if hasattr(models, list_model):
                    self.schemas[self.name(list_model)]["description"] = f"{kind}List is a list of {kind} objects."
                    self.schemas[self.name(list_model)]["x-kubernetes-group-version-kind"] = [
                        {"group": group, "kind": kind + "List", "version": "v1"}]
        return {"components": {"schemas": dict(sorted(self.schemas.items()))}}


def main():
    doc = Generator().run()
    text = json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=True) + "\n"
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
