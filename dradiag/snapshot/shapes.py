"""The shapes of the fields dradiag reads, per kind and API version, as msgspec schemas.

Offline input is hand-edited, pasted, written by other tools or older APIs; a live server
may misbehave. Rather than an ``isinstance`` check at every read in the analyses, each
object is checked once against these declarative schemas where it enters the Snapshot
(``snapshot.shape_check``). They name only what the engine reads, and every field is
optional: a missing field is the engine's business, a field of the wrong *shape* (a
string where a map belongs, a list of numbers where a list of objects does) is not.
Unknown and newer fields are ignored by the schemas and survive in the raw dicts: the
check validates, it never converts (DESIGN §1).

Versions: resource.k8s.io ``v1`` has the one layout the API server accepts under it;
``v1beta2``, ``v1beta1`` and ``v1alpha3`` are read shape-driven by ``normalize.py``
(a ``basic:`` block flattened whatever the version says), so one "legacy" schema per kind
accepts both layouts. Events have a core/v1 and an events.k8s.io/v1 schema.

Timestamps must parse as RFC 3339 here (a junk time is dropped with its warning, so no
phase reasons from it). Quantities and semver strings are checked for their type
only: whether their text parses is decided where they are read, as the scheduler would
(a finding naming the device), never an exception (issue 15 §2).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar, Union

from msgspec import UNSET, Struct, UnsetType, field

T = TypeVar("T")
Opt = Union[T, UnsetType]  # noqa: UP007 - a generic alias; `T | UnsetType` cannot be subscripted
"""An optional field: absent is fine, present must have the shape (``null`` is not)."""


Timestamp = datetime
"""An RFC 3339 time: msgspec parses the string in C (a junk or impossible time is a
shape error) and takes the datetime YAML makes of an unquoted one as it is."""

Quantity = Union[str, int, float]  # noqa: UP007 - kept a named alias for the schemas
"""A resource.Quantity: a string (``40Gi``), or the number YAML makes of a bare ``4``."""


class _Schema(Struct, rename="camel", omit_defaults=True, gc=False):
    """Base of every schema: Kubernetes spells fields in camelCase."""


# -- common ---------------------------------------------------------------------------


class OwnerReference(_Schema):
    api_version: Opt[str] = UNSET
    kind: Opt[str] = UNSET
    name: Opt[str] = UNSET
    uid: Opt[str] = UNSET
    controller: Opt[bool] = UNSET


class ObjectMeta(_Schema):
    name: Opt[str] = UNSET
    namespace: Opt[str] = UNSET
    uid: Opt[str] = UNSET
    generate_name: Opt[str] = UNSET
    generation: Opt[int] = UNSET
    creation_timestamp: Opt[Timestamp] = UNSET
    deletion_timestamp: Opt[Timestamp] = UNSET
    labels: Opt[dict[str, str]] = UNSET
    annotations: Opt[dict[str, str]] = UNSET
    owner_references: Opt[list[OwnerReference]] = UNSET
    finalizers: Opt[list[str]] = UNSET


class _Object(_Schema):
    api_version: Opt[str] = UNSET
    kind: Opt[str] = UNSET
    metadata: Opt[ObjectMeta] = UNSET


class NodeSelectorRequirement(_Schema):
    key: Opt[str] = UNSET
    operator: Opt[str] = UNSET
    values: Opt[list[str]] = UNSET


class NodeSelectorTerm(_Schema):
    match_expressions: Opt[list[NodeSelectorRequirement]] = UNSET
    match_fields: Opt[list[NodeSelectorRequirement]] = UNSET


class NodeSelector(_Schema):
    node_selector_terms: Opt[list[NodeSelectorTerm]] = UNSET


class Taint(_Schema):
    key: Opt[str] = UNSET
    value: Opt[str] = UNSET
    effect: Opt[str] = UNSET
    time_added: Opt[Timestamp] = UNSET


class Toleration(_Schema):
    key: Opt[str] = UNSET
    operator: Opt[str] = UNSET
    value: Opt[str] = UNSET
    effect: Opt[str] = UNSET
    toleration_seconds: Opt[int] = UNSET


class Condition(_Schema):
    type: Opt[str] = UNSET
    status: Opt[str] = UNSET
    reason: Opt[str] = UNSET
    message: Opt[str] = UNSET
    last_transition_time: Opt[Timestamp] = UNSET


# -- resource.k8s.io: ResourceSlice -----------------------------------------------------


Scalar = Union[str, int, float, bool]  # noqa: UP007 - kept a named alias for the schemas
"""An attribute member's value. The member (``int``, ``string``…) names the type, but a
value of another scalar type is the CEL environment's to convert or reject, device by
device, as the scheduler does (a conversion error is a finding, not a shape error)."""


class DeviceAttribute(_Schema, forbid_unknown_fields=True):
    """One typed value. The only schema closed to unknown fields: the CEL environment
    and the attribute catalogue read every member as a value, so a member of no known
    type is dropped (with its warning) rather than taken for one."""

    string: Opt[Scalar] = UNSET
    int_: Opt[Scalar] = field(default=UNSET, name="int")
    bool_: Opt[Scalar] = field(default=UNSET, name="bool")
    version: Opt[Scalar] = UNSET
    strings: Opt[list[Scalar]] = UNSET
    ints: Opt[list[Scalar]] = UNSET
    bools: Opt[list[Scalar]] = UNSET
    versions: Opt[list[Scalar]] = UNSET


class DeviceCapacity(_Schema):
    value: Opt[Quantity] = UNSET
    request_policy: Opt[dict[str, Any]] = UNSET


class Counter(_Schema):
    value: Opt[Quantity] = UNSET


class CounterSet(_Schema):
    name: Opt[str] = UNSET
    counters: Opt[dict[str, Counter]] = UNSET


class DeviceCounterConsumption(_Schema):
    counter_set: Opt[str] = UNSET
    counters: Opt[dict[str, Counter]] = UNSET


class _DeviceFields(_Schema):
    name: Opt[str] = UNSET
    attributes: Opt[dict[str, DeviceAttribute]] = UNSET
    consumes_counters: Opt[list[DeviceCounterConsumption]] = UNSET
    node_name: Opt[str] = UNSET
    node_selector: Opt[NodeSelector] = UNSET
    all_nodes: Opt[bool] = UNSET
    taints: Opt[list[Taint]] = UNSET
    binds_to_node: Opt[bool] = UNSET
    binding_conditions: Opt[list[str]] = UNSET
    binding_failure_conditions: Opt[list[str]] = UNSET
    allow_multiple_allocations: Opt[bool] = UNSET


class DeviceV1(_DeviceFields):
    capacity: Opt[dict[str, DeviceCapacity]] = UNSET


class BasicDevice(_DeviceFields):
    capacity: Opt[dict[str, DeviceCapacity | Quantity]] = UNSET
    """v1alpha3 spells a capacity as a bare quantity."""


class DeviceLegacy(BasicDevice):
    basic: Opt[BasicDevice] = UNSET


class Pool(_Schema):
    name: Opt[str] = UNSET
    generation: Opt[int] = UNSET
    resource_slice_count: Opt[int] = UNSET


class _SliceSpecFields(_Schema):
    driver: Opt[str] = UNSET
    pool: Opt[Pool] = UNSET
    node_name: Opt[str] = UNSET
    node_selector: Opt[NodeSelector] = UNSET
    all_nodes: Opt[bool] = UNSET
    per_device_node_selection: Opt[bool] = UNSET
    shared_counters: Opt[list[CounterSet]] = UNSET


class SliceSpecV1(_SliceSpecFields):
    devices: Opt[list[DeviceV1]] = UNSET


class SliceSpecLegacy(_SliceSpecFields):
    devices: Opt[list[DeviceLegacy]] = UNSET


class ResourceSliceV1(_Object):
    spec: Opt[SliceSpecV1] = UNSET


class ResourceSliceLegacy(_Object):
    spec: Opt[SliceSpecLegacy] = UNSET


# -- resource.k8s.io: DeviceClass, DeviceTaintRule --------------------------------------


class CELSelector(_Schema):
    expression: Opt[str] = UNSET


class DeviceSelector(_Schema):
    cel: Opt[CELSelector] = UNSET


class OpaqueConfig(_Schema):
    driver: Opt[str] = UNSET
    parameters: Opt[Any] = UNSET


class DeviceConfig(_Schema):
    requests: Opt[list[str]] = UNSET
    opaque: Opt[OpaqueConfig] = UNSET


class DeviceClassSpec(_Schema):
    selectors: Opt[list[DeviceSelector]] = UNSET
    config: Opt[list[DeviceConfig]] = UNSET
    extended_resource_name: Opt[str] = UNSET


class DeviceClass(_Object):
    spec: Opt[DeviceClassSpec] = UNSET


class TaintSelector(_Schema):
    device_class_name: Opt[str] = UNSET
    driver: Opt[str] = UNSET
    pool: Opt[str] = UNSET
    device: Opt[str] = UNSET
    selectors: Opt[list[DeviceSelector]] = UNSET


class DeviceTaintRuleSpec(_Schema):
    device_selector: Opt[TaintSelector] = UNSET
    taint: Opt[Taint] = UNSET


class DeviceTaintRule(_Object):
    spec: Opt[DeviceTaintRuleSpec] = UNSET


# -- resource.k8s.io: ResourceClaim, ResourceClaimTemplate -------------------------------


class CapacityRequirements(_Schema):
    requests: Opt[dict[str, Quantity]] = UNSET


class _ExactFields(_Schema):
    device_class_name: Opt[str] = UNSET
    selectors: Opt[list[DeviceSelector]] = UNSET
    allocation_mode: Opt[str] = UNSET
    count: Opt[int] = UNSET
    admin_access: Opt[bool] = UNSET
    tolerations: Opt[list[Toleration]] = UNSET
    capacity: Opt[CapacityRequirements] = UNSET


class ExactDeviceRequest(_ExactFields):
    pass


class DeviceSubRequest(_ExactFields):
    name: Opt[str] = UNSET


class DeviceRequestV1(_Schema):
    name: Opt[str] = UNSET
    exactly: Opt[ExactDeviceRequest] = UNSET
    first_available: Opt[list[DeviceSubRequest]] = UNSET


class DeviceRequestLegacy(_ExactFields):
    """v1alpha3/v1beta1 keep the exact-request fields at the request's top level."""

    name: Opt[str] = UNSET
    exactly: Opt[ExactDeviceRequest] = UNSET
    first_available: Opt[list[DeviceSubRequest]] = UNSET


class DeviceConstraint(_Schema):
    requests: Opt[list[str]] = UNSET
    match_attribute: Opt[str] = UNSET
    distinct_attribute: Opt[str] = UNSET


class _ClaimDevicesFields(_Schema):
    constraints: Opt[list[DeviceConstraint]] = UNSET
    config: Opt[list[DeviceConfig]] = UNSET


class ClaimDevicesV1(_ClaimDevicesFields):
    requests: Opt[list[DeviceRequestV1]] = UNSET


class ClaimDevicesLegacy(_ClaimDevicesFields):
    requests: Opt[list[DeviceRequestLegacy]] = UNSET


class ClaimSpecV1(_Schema):
    devices: Opt[ClaimDevicesV1] = UNSET


class ClaimSpecLegacy(_Schema):
    devices: Opt[ClaimDevicesLegacy] = UNSET


class DeviceRequestAllocationResult(_Schema):
    request: Opt[str] = UNSET
    driver: Opt[str] = UNSET
    pool: Opt[str] = UNSET
    device: Opt[str] = UNSET
    admin_access: Opt[bool] = UNSET
    tolerations: Opt[list[Toleration]] = UNSET
    binding_conditions: Opt[list[str]] = UNSET
    binding_failure_conditions: Opt[list[str]] = UNSET
    share_id: Opt[str] = field(default=UNSET, name="shareID")
    consumed_capacity: Opt[dict[str, Quantity]] = UNSET


class AllocatedDeviceConfig(_Schema):
    source: Opt[str] = UNSET
    requests: Opt[list[str]] = UNSET
    opaque: Opt[OpaqueConfig] = UNSET


class DeviceAllocationResult(_Schema):
    results: Opt[list[DeviceRequestAllocationResult]] = UNSET
    config: Opt[list[AllocatedDeviceConfig]] = UNSET


class AllocationResult(_Schema):
    devices: Opt[DeviceAllocationResult] = UNSET
    node_selector: Opt[NodeSelector] = UNSET
    allocation_timestamp: Opt[Timestamp] = UNSET


class ConsumerReference(_Schema):
    api_group: Opt[str] = UNSET
    resource: Opt[str] = UNSET
    name: Opt[str] = UNSET
    uid: Opt[str] = UNSET


class AllocatedDeviceStatus(_Schema):
    driver: Opt[str] = UNSET
    pool: Opt[str] = UNSET
    device: Opt[str] = UNSET
    share_id: Opt[str] = field(default=UNSET, name="shareID")
    conditions: Opt[list[Condition]] = UNSET


class ClaimStatus(_Schema):
    allocation: Opt[AllocationResult] = UNSET
    reserved_for: Opt[list[ConsumerReference]] = UNSET
    devices: Opt[list[AllocatedDeviceStatus]] = UNSET


class ResourceClaimV1(_Object):
    spec: Opt[ClaimSpecV1] = UNSET
    status: Opt[ClaimStatus] = UNSET


class ResourceClaimLegacy(_Object):
    spec: Opt[ClaimSpecLegacy] = UNSET
    status: Opt[ClaimStatus] = UNSET


class TemplateSpecV1(_Schema):
    metadata: Opt[ObjectMeta] = UNSET
    spec: Opt[ClaimSpecV1] = UNSET


class TemplateSpecLegacy(_Schema):
    metadata: Opt[ObjectMeta] = UNSET
    spec: Opt[ClaimSpecLegacy] = UNSET


class ResourceClaimTemplateV1(_Object):
    spec: Opt[TemplateSpecV1] = UNSET


class ResourceClaimTemplateLegacy(_Object):
    spec: Opt[TemplateSpecLegacy] = UNSET


# -- core/v1: Pod, Node ---------------------------------------------------------------------


class ResourceClaimSource(_Schema):
    resource_claim_name: Opt[str] = UNSET
    resource_claim_template_name: Opt[str] = UNSET


class PodResourceClaim(_Schema):
    name: Opt[str] = UNSET
    resource_claim_name: Opt[str] = UNSET
    resource_claim_template_name: Opt[str] = UNSET
    source: Opt[ResourceClaimSource] = UNSET
    """Before Kubernetes 1.31 the claim reference sat under ``source``."""


class ContainerClaim(_Schema):
    name: Opt[str] = UNSET
    request: Opt[str] = UNSET


class ResourceRequirements(_Schema):
    claims: Opt[list[ContainerClaim]] = UNSET
    limits: Opt[dict[str, Quantity]] = UNSET
    requests: Opt[dict[str, Quantity]] = UNSET


class Container(_Schema):
    name: Opt[str] = UNSET
    image: Opt[str] = UNSET
    command: Opt[list[str]] = UNSET
    args: Opt[list[str]] = UNSET
    resources: Opt[ResourceRequirements] = UNSET


class PodSpec(_Schema):
    node_name: Opt[str] = UNSET
    scheduler_name: Opt[str] = UNSET
    resource_claims: Opt[list[PodResourceClaim]] = UNSET
    containers: Opt[list[Container]] = UNSET
    init_containers: Opt[list[Container]] = UNSET
    node_selector: Opt[dict[str, str]] = UNSET
    tolerations: Opt[list[Toleration]] = UNSET


class ContainerStateWaiting(_Schema):
    reason: Opt[str] = UNSET
    message: Opt[str] = UNSET


class ContainerStateRunning(_Schema):
    started_at: Opt[Timestamp] = UNSET


class ContainerStateTerminated(_Schema):
    exit_code: Opt[int] = UNSET
    signal: Opt[int] = UNSET
    reason: Opt[str] = UNSET
    message: Opt[str] = UNSET
    started_at: Opt[Timestamp] = UNSET
    finished_at: Opt[Timestamp] = UNSET


class ContainerState(_Schema):
    waiting: Opt[ContainerStateWaiting] = UNSET
    running: Opt[ContainerStateRunning] = UNSET
    terminated: Opt[ContainerStateTerminated] = UNSET


class ContainerStatus(_Schema):
    name: Opt[str] = UNSET
    ready: Opt[bool] = UNSET
    started: Opt[bool] = UNSET
    restart_count: Opt[int] = UNSET
    image: Opt[str] = UNSET
    image_id: Opt[str] = field(default=UNSET, name="imageID")
    container_id: Opt[str] = field(default=UNSET, name="containerID")
    state: Opt[ContainerState] = UNSET
    last_state: Opt[ContainerState] = UNSET


class PodResourceClaimStatus(_Schema):
    name: Opt[str] = UNSET
    resource_claim_name: Opt[str] = UNSET


class ContainerExtendedResourceRequest(_Schema):
    container_name: Opt[str] = UNSET
    request_name: Opt[str] = UNSET
    resource_name: Opt[str] = UNSET


class PodExtendedResourceClaimStatus(_Schema):
    """DRAExtendedResource (1.34+): the claim made for a pod's extended-resource requests."""

    resource_claim_name: Opt[str] = UNSET
    request_mappings: Opt[list[ContainerExtendedResourceRequest]] = UNSET


class PodStatus(_Schema):
    phase: Opt[str] = UNSET
    reason: Opt[str] = UNSET
    message: Opt[str] = UNSET
    start_time: Opt[Timestamp] = UNSET
    conditions: Opt[list[Condition]] = UNSET
    container_statuses: Opt[list[ContainerStatus]] = UNSET
    init_container_statuses: Opt[list[ContainerStatus]] = UNSET
    resource_claim_statuses: Opt[list[PodResourceClaimStatus]] = UNSET
    extended_resource_claim_status: Opt[PodExtendedResourceClaimStatus] = UNSET


class Pod(_Object):
    spec: Opt[PodSpec] = UNSET
    status: Opt[PodStatus] = UNSET


class NodeSpec(_Schema):
    taints: Opt[list[Taint]] = UNSET
    unschedulable: Opt[bool] = UNSET


class NodeSystemInfo(_Schema):
    kubelet_version: Opt[str] = UNSET
    kernel_version: Opt[str] = UNSET
    os_image: Opt[str] = UNSET
    container_runtime_version: Opt[str] = UNSET


class NodeStatus(_Schema):
    conditions: Opt[list[Condition]] = UNSET
    node_info: Opt[NodeSystemInfo] = UNSET
    capacity: Opt[dict[str, Quantity]] = UNSET
    allocatable: Opt[dict[str, Quantity]] = UNSET


class Node(_Object):
    spec: Opt[NodeSpec] = UNSET
    status: Opt[NodeStatus] = UNSET


# -- Events: core/v1 and events.k8s.io/v1 --------------------------------------------------


class ObjectReference(_Schema):
    api_version: Opt[str] = UNSET
    kind: Opt[str] = UNSET
    namespace: Opt[str] = UNSET
    name: Opt[str] = UNSET
    uid: Opt[str] = UNSET
    field_path: Opt[str] = UNSET


class EventSource(_Schema):
    component: Opt[str] = UNSET
    host: Opt[str] = UNSET


class EventSeries(_Schema):
    count: Opt[int] = UNSET
    last_observed_time: Opt[Timestamp] = UNSET


class EventCoreV1(_Object):
    involved_object: Opt[ObjectReference] = UNSET
    reason: Opt[str] = UNSET
    message: Opt[str] = UNSET
    type: Opt[str] = UNSET
    count: Opt[int] = UNSET
    first_timestamp: Opt[Timestamp] = UNSET
    last_timestamp: Opt[Timestamp] = UNSET
    event_time: Opt[Timestamp] = UNSET
    source: Opt[EventSource] = UNSET
    reporting_component: Opt[str] = UNSET
    reporting_instance: Opt[str] = UNSET
    series: Opt[EventSeries] = UNSET


class EventEventsV1(_Object):
    regarding: Opt[ObjectReference] = UNSET
    related: Opt[ObjectReference] = UNSET
    reason: Opt[str] = UNSET
    note: Opt[str] = UNSET
    type: Opt[str] = UNSET
    action: Opt[str] = UNSET
    deprecated_count: Opt[int] = UNSET
    deprecated_first_timestamp: Opt[Timestamp] = UNSET
    deprecated_last_timestamp: Opt[Timestamp] = UNSET
    event_time: Opt[Timestamp] = UNSET
    deprecated_source: Opt[EventSource] = UNSET
    reporting_controller: Opt[str] = UNSET
    reporting_instance: Opt[str] = UNSET
    series: Opt[EventSeries] = UNSET
