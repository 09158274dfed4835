"""REST API for the quota tree and departments."""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.plumbing import build_array_type, build_basic_type
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import IsAdminUser, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.models import AuditEntry

from . import departments, services
from .models import Department, Membership, QuotaNode

API = AuditEntry.Source.API

_USERNAME = re.compile(r"^[\w.@+-]{1,150}$")


class QuotaTreeView(APIView):
    """The whole ElasticQuotaTree: read it, or apply a new one like ``kubectl apply``."""

    def get_permissions(self):
        return [IsAdminUser()] if self.request.method == "PUT" else [IsAuthenticated()]

    @extend_schema(responses=OpenApiTypes.OBJECT, summary="The quota tree as an ElasticQuotaTree")
    def get(self, request):
        return Response(services.tree_export())

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses=OpenApiTypes.OBJECT,
        summary="Apply an ElasticQuotaTree (staff): creates, updates and retires nodes and queues",
    )
    def put(self, request):
        services.tree_apply(document=request.data, actor=request.user, source=API)
        return Response(services.tree_export())


class DepartmentSerializer(serializers.Serializer):
    name = serializers.SlugField(max_length=63)
    quota_node = serializers.CharField(help_text="the path of the node it owns: root/algorithm")

    def validate_quota_node(self, value: str) -> QuotaNode:
        node = QuotaNode.objects.filter(path=value, active=True).first()
        if node is None:
            raise serializers.ValidationError(f"{value!r} is not a node of the quota tree")
        return node

    def validate_name(self, value: str) -> str:
        if Department.objects.filter(name=value).exists():
            raise serializers.ValidationError(f"a department named {value!r} exists")
        return value


def department_data(department: Department) -> dict:
    return {
        "name": department.name,
        "quota_node": department.quota_node.path,
        "members": [
            {"username": m.user.username, "role": m.role}
            for m in department.membership_set.select_related("user").order_by("user__username")
        ],
    }


class DepartmentListView(APIView):
    def get_permissions(self):
        return [IsAdminUser()] if self.request.method == "POST" else [IsAuthenticated()]

    @extend_schema(
        responses={200: build_array_type(build_basic_type(OpenApiTypes.OBJECT))},
        summary="Departments the user belongs to (staff: all)",
    )
    def get(self, request):
        departments = Department.objects.select_related("quota_node")
        if not request.user.is_staff:
            departments = departments.filter(membership__user=request.user)
        return Response([department_data(d) for d in departments])

    @extend_schema(
        request=DepartmentSerializer,
        responses={201: OpenApiTypes.OBJECT},
        summary="Create a department (staff)",
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
            return Response({"name": ["a department with this name exists"]}, status=400)
        return Response(department_data(department), status=status.HTTP_201_CREATED)


class MemberSerializer(serializers.Serializer):
    username = serializers.RegexField(_USERNAME, max_length=150)
    role = serializers.ChoiceField(choices=Membership.Role.choices, default=Membership.Role.MEMBER)


class DepartmentMembersView(APIView):
    permission_classes = [IsAdminUser]

    @extend_schema(
        request=MemberSerializer,
        responses={
            201: inline_serializer(
                "Membership", {"username": serializers.CharField(), "role": serializers.CharField()}
            )
        },
        summary="Add a member or manager (staff); the user is created if missing",
    )
    def post(self, request, name: str):
        department = get_object_or_404(Department, name=name)
        serializer = MemberSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        membership = departments.membership_set(
            department=department, **serializer.validated_data, actor=request.user, source=API
        )
        return Response(
            {"username": membership.user.username, "role": membership.role},
            status=status.HTTP_201_CREATED,
        )


class DepartmentMemberView(APIView):
    permission_classes = [IsAdminUser]

    @extend_schema(responses={204: None}, summary="Remove a member or manager (staff)")
    def delete(self, request, name: str, username: str):
        membership = get_object_or_404(Membership, department__name=name, user__username=username)
        departments.membership_delete(membership=membership, actor=request.user, source=API)
        return Response(status=status.HTTP_204_NO_CONTENT)
