"""REST API for the quota tree and departments."""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.models import AuditEntry

from . import departments, fairness, services
from .api_base import SIGNED_IN, STAFF_ONLY, Body, json_parsers, refusals
from .limits import PERSON_JOBS_MAX, RETRIES_MAX, STOP_POLICIES
from .models import Department, Membership, QuotaNode
from .scope import Right
from .selectors import departments_for_user

API = AuditEntry.Source.API

_USERNAME = re.compile(r"^[\w.@+-]{1,150}$")


class JsonText:
    """A field that takes a JSON string only: DRF's CharField writes a number as text, so
    ``{"username": 0}`` made a user named "0". A form's fields are text already, and are
    judged by the field's own rule."""

    def to_internal_value(self, data):
        if type(data) is not str:
            raise serializers.ValidationError(_("must be a string"))
        return super().to_internal_value(data)  # type: ignore[misc]  # the field mixed with


class Username(JsonText, serializers.RegexField):
    pass


class Slug(JsonText, serializers.SlugField):
    pass


class NodePath(JsonText, serializers.CharField):
    pass


@extend_schema_field({"anyOf": [{"type": "string"}, {"type": "number"}]})
class Quantity(serializers.Field):
    """A Kubernetes quantity: "4", "500m", "8Gi", or a number, as YAML writes one."""

    def to_representation(self, value):
        return value


class PersonLimits(serializers.Serializer):
    jobs = serializers.IntegerField(
        required=False, min_value=1, max_value=PERSON_JOBS_MAX,
        help_text="the most jobs one person may have holding quota in each leaf below",
    )  # fmt: skip
    resources = serializers.DictField(
        child=Quantity(),
        required=False,
        help_text='the most one person may hold: {"nvidia.com/gpu": "4"}',
    )


class NodeLimits(serializers.Serializer):
    """What the jobs of the leaves below may do, each limit taken from the nearest node."""

    defaultTime = serializers.CharField(  # noqa: N815 - the document's own name
        required=False, help_text="the time limit of a job that gives none: 2h, 1h30m"
    )
    maxTime = serializers.CharField(  # noqa: N815
        required=False, help_text="the longest time limit a job may ask for: 1d"
    )
    maxRetries = serializers.IntegerField(  # noqa: N815
        required=False, min_value=0, max_value=RETRIES_MAX,
        help_text="the most retries a job may ask for",
    )  # fmt: skip
    perPerson = PersonLimits(required=False)  # noqa: N815


class QuotaNodeDocument(serializers.Serializer):
    """A node of the tree: a branch has ``children`` (nodes of this same shape), a leaf
    ``namespaces``."""

    name = serializers.CharField()
    min = serializers.DictField(
        child=Quantity(), required=False, allow_null=True, help_text='{"cpu": "4"}'
    )
    max = serializers.DictField(
        child=Quantity(), required=False, allow_null=True, help_text='{"cpu": "8"}'
    )
    namespaces = serializers.ListField(
        child=serializers.CharField(), required=False, allow_null=True
    )
    children = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        allow_null=True,
        help_text="nodes of this same shape",
    )
    weight = serializers.FloatField(
        required=False,
        min_value=0,
        max_value=fairness.WEIGHT_MAX,
        help_text="its fair-share weight among its siblings while the tree has a half-life "
        "(above 0; default 1, and left out when 1)",
    )
    stopPolicy = serializers.ChoiceField(  # noqa: N815 - the document's own name
        choices=["None", *STOP_POLICIES],
        required=False,
        allow_null=True,
        help_text="Hold: nothing new is admitted below the node, running jobs go on; "
        "HoldAndDrain: and its running jobs are preempted back to their queues",
    )
    limits = NodeLimits(required=False, allow_null=True)

    class Meta:
        ref_name = "QuotaNode"


class FairSharing(serializers.Serializer):
    halfLife = serializers.CharField(  # noqa: N815 - the document's own name
        required=False,
        allow_null=True,
        help_text="how fast past usage is forgotten, 1h to 365d, such as 7d or 168h; "
        "absent: spare capacity goes by usage now only",
    )


class QuotaTreeSpec(serializers.Serializer):
    root = QuotaNodeDocument()
    fairSharing = FairSharing(required=False)  # noqa: N815 - the document's own name


class QuotaTreeDocument(serializers.Serializer):
    """The tree as an ``ElasticQuotaTree`` object (``deploy/seed``'s format). Keys it does
    not name are left alone, as a tree read back from Kubernetes carries its ``status``."""

    # Patterns of one value rather than enums: the schema's enums share their names across
    # components, and a job's kind is another.
    apiVersion = serializers.RegexField(f"^{re.escape(services.API_VERSION)}$", required=False)
    kind = serializers.RegexField(f"^{services.KIND}$", required=False)
    metadata = serializers.JSONField(
        required=False, help_text="its name and namespace; Caldera reads none of it"
    )
    spec = QuotaTreeSpec()

    class Meta:
        ref_name = "ElasticQuotaTree"


# What a tree is refused for that its schema cannot say (services.tree_parse).
TREE_REFUSALS = {
    "spec.root.*": "a tree its rules refuse: node names, quantities and namespaces as "
    "Kubernetes writes them, names unique among siblings, each node's min within its max "
    "and its parent's; or one that retires a node whose queue holds jobs",
    "body": "a key holding a control character",
    "*": "under a key the tree does not name (left as it is), a key or value holding a "
    "control character, at any depth",
    "metadata.*": "a key holding a control character, at any depth",
    "spec.*": "a key holding a control character, at any depth",
    "spec.fairSharing": "not an object with one field, halfLife",
    "spec.fairSharing.halfLife": "not a duration from 1h to 365d",
}


class QuotaTreeView(APIView):
    """The whole ElasticQuotaTree: read it, or apply a new one like ``kubectl apply``."""

    parser_classes = json_parsers()
    required_right = {"PUT": Right.ADMIN}

    def get_permissions(self):
        chosen = STAFF_ONLY if self.request.method == "PUT" else SIGNED_IN
        return [permission() for permission in chosen]

    @extend_schema(responses=QuotaTreeDocument, summary="The quota tree as an ElasticQuotaTree")
    def get(self, request):
        return Response(services.tree_export())

    @extend_schema(
        request=QuotaTreeDocument,
        responses=QuotaTreeDocument,
        extensions=refusals(TREE_REFUSALS),
        summary="Apply an ElasticQuotaTree (staff): creates, updates and retires nodes and queues",
    )
    def put(self, request):
        services.tree_apply(document=request.data, actor=request.user, source=API)
        return Response(services.tree_export())


class DepartmentSerializer(Body):
    name = Slug(max_length=63, trim_whitespace=False)
    quota_node = NodePath(help_text="the path of the node it owns: root/algorithm")

    def validate_quota_node(self, value: str) -> QuotaNode:
        node = QuotaNode.objects.filter(path=value, active=True).first()
        if node is None:
            raise serializers.ValidationError(
                _("%(path)r is not a node of the quota tree") % {"path": value}
            )
        return node

    def validate_name(self, value: str) -> str:
        if Department.objects.filter(name=value).exists():
            raise serializers.ValidationError(
                _("a department named %(name)r exists") % {"name": value}
            )
        return value


class MemberSerializer(Body):
    username = Username(_USERNAME, max_length=150, trim_whitespace=False)
    role = serializers.ChoiceField(choices=Membership.Role.choices, default=Membership.Role.MEMBER)


class MembershipOut(serializers.Serializer):
    username = serializers.CharField(source="user.username")
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class DepartmentOut(serializers.Serializer):
    name = serializers.CharField()
    quota_node = serializers.CharField(source="quota_node.path", help_text="the node it owns")
    members = serializers.SerializerMethodField()

    class Meta:
        ref_name = "Department"

    @extend_schema_field(MembershipOut(many=True))
    def get_members(self, department: Department) -> list[dict]:
        members = department.membership_set.select_related("user").order_by("user__username")
        return MembershipOut(members, many=True).data  # type: ignore[return-value]  # many: a list


class DepartmentListView(APIView):
    required_right = {"POST": Right.ADMIN}

    def get_permissions(self):
        chosen = STAFF_ONLY if self.request.method == "POST" else SIGNED_IN
        return [permission() for permission in chosen]

    @extend_schema(
        responses=DepartmentOut(many=True),
        summary="Departments the user belongs to (staff: all)",
    )
    def get(self, request):
        departments = departments_for_user(request.user).select_related("quota_node")
        return Response([DepartmentOut(d).data for d in departments])

    @extend_schema(
        request=DepartmentSerializer,
        responses={201: DepartmentOut},
        summary="Create a department (staff)",
        extensions=refusals(
            {
                "name": "a department of that name exists",
                "quota_node": "no active node of the quota tree has that path",
            }
        ),
    )
    def post(self, request):
        serializer = DepartmentSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            with transaction.atomic():
                department = departments.department_create(
                    **serializer.validated_data, actor=request.user, source=API
                )
        except IntegrityError:
            return Response({"name": [_("a department with this name exists")]}, status=400)
        return Response(DepartmentOut(department).data, status=status.HTTP_201_CREATED)


class DepartmentMembersView(APIView):
    permission_classes = STAFF_ONLY
    required_right = Right.ADMIN

    @extend_schema(
        request=MemberSerializer,
        responses={201: MembershipOut},
        summary="Add a member or manager (staff); the user is created if missing",
    )
    def post(self, request, name: str):
        department = get_object_or_404(Department, name=name)
        serializer = MemberSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        membership = departments.membership_set(
            department=department, **serializer.validated_data, actor=request.user, source=API
        )
        return Response(MembershipOut(membership).data, status=status.HTTP_201_CREATED)


class DepartmentMemberView(APIView):
    permission_classes = STAFF_ONLY
    required_right = Right.ADMIN

    @extend_schema(responses={204: None}, summary="Remove a member or manager (staff)")
    def delete(self, request, name: str, username: str):
        membership = get_object_or_404(Membership, department__name=name, user__username=username)
        departments.membership_delete(membership=membership, actor=request.user, source=API)
        return Response(status=status.HTTP_204_NO_CONTENT)
