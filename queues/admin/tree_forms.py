"""Forms of the quota tree's admin pages: a node's values and its children, checked as one tree.

A node's page edits its ``min``, ``max`` and namespaces and, inline, those of its children
(rename, add, retire). Django validates the node's form first and its children's formset
second, handing both the same node instance; the form leaves itself on that instance
(``editing_form``) so the formset, which sees everything, builds one ElasticQuotaTree
document and checks it with ``services.tree_check``. Each broken rule goes back to the row
it concerns, and the whole change is applied by one ``tree_apply``, or not at all.
"""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.http import QueryDict
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from kube.quantity import POOL_MARK, format_resources

from .. import fairness, services, signals
from ..limits import STOP_POLICIES, limits_lines
from ..models import QuotaNode

RESOURCE_HELP = gettext_lazy(
    "One resource per line, as in the tree's YAML: 'cpu: 12', 'memory: 12Gi'; a node pool's "
    "share with the pool after an @: 'nvidia.com/gpu@h100: 8'."
)
TEXT_FIELDS = {
    "min": "min_text", "max": "max_text", "namespaces": "namespaces_text",
    "stopPolicy": "stop_policy", "limits": "limits_text",
}  # fmt: skip
LIMITS_HELP = gettext_lazy(
    "One per line, for every leaf below unless a node nearer it says otherwise: "
    "'defaultTime: 2h', 'maxTime: 24h', 'maxRetries: 3', 'perPerson.jobs: 2', "
    "'perPerson.resources.nvidia.com/gpu: 4'."
)


def resources_text(resources: dict) -> str:
    return "\n".join(f"{name}: {value}" for name, value in format_resources(resources).items())


def parse_resources_text(text: str) -> dict[str, str]:
    """'cpu: 12' lines into {"cpu": "12"}; quantities are checked by the tree's parser."""
    result: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or not value.strip():
            raise forms.ValidationError(
                _("line %(number)d: write 'resource: quantity', got %(line)r")
                % {"number": number, "line": line}
            )
        result[name.strip()] = value.strip()
    return result


class NodeValuesForm(forms.ModelForm):
    """A node's ``min``, ``max`` and namespaces as text; ``values`` holds them once parsed.

    Nothing is written through this form: the admin applies the tree document instead.
    """

    min_text = forms.CharField(
        label=gettext_lazy("Min (guaranteed)"), widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        help_text=RESOURCE_HELP,
    )  # fmt: skip
    max_text = forms.CharField(
        label=gettext_lazy("Max (ceiling)"), widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        help_text=RESOURCE_HELP,
    )  # fmt: skip
    namespaces_text = forms.CharField(
        label=gettext_lazy("Namespaces"), required=False,
        help_text=gettext_lazy(
            "Leaves only: the Kubernetes namespaces bound to this node, comma-separated."
        ),
    )  # fmt: skip
    weight = forms.FloatField(
        label=gettext_lazy("Fair-share weight"), required=False,
        help_text=gettext_lazy(
            "Its share of spare capacity against its siblings while the tree has a "
            "half-life: twice the weight, twice the share. Empty: 1."
        ),
    )  # fmt: skip

    class Meta:
        model = QuotaNode
        fields: list[str] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        node = self.instance
        self.fields["min_text"].initial = resources_text(node.min)
        self.fields["max_text"].initial = resources_text(node.max)
        self.fields["namespaces_text"].initial = ", ".join(node.namespaces)
        self.fields["weight"].initial = node.weight if node.pk else 1.0
        self.values: dict | None = None

    def clean(self):
        cleaned = cast(dict[str, Any], super().clean())  # a ModelForm's: its cleaned_data
        values: dict = {}
        for key in ("min", "max"):
            try:
                values[key] = parse_resources_text(cleaned.get(TEXT_FIELDS[key], ""))
            except forms.ValidationError as error:
                self.add_error(TEXT_FIELDS[key], error)
        text = cleaned.get("namespaces_text", "")
        values["namespaces"] = [ns.strip() for ns in text.split(",") if ns.strip()]
        weight = cleaned.get("weight")
        values["weight"] = 1.0 if weight is None else weight
        if not self.errors:
            self.values = values
        return cleaned


def parse_limits_text(text: str) -> dict[str, Any]:
    """The form's lines as the tree's YAML writes ``limits``; values are checked by the
    tree's parser (a count given as digits is a number)."""
    said: dict[str, Any] = {}
    for name, value in parse_resources_text(text).items():
        typed: Any = int(value) if value.isdigit() else value
        if name.startswith("perPerson.resources."):
            person = said.setdefault("perPerson", {})
            person.setdefault("resources", {})[name.removeprefix("perPerson.resources.")] = value
        elif name.startswith("perPerson."):
            said.setdefault("perPerson", {})[name.removeprefix("perPerson.")] = typed
        else:
            said[name] = value if name.endswith("Time") else typed
    return said


class QuotaNodeForm(NodeValuesForm):
    """The node's own values; its children's formset checks and carries the whole change.
    The root's also carries the tree's fair-sharing half-life. Any node's also carries its
    stopPolicy and the limits of its leaves' jobs (``queues.limits``)."""

    stop_policy = forms.ChoiceField(
        label=gettext_lazy("Stop policy"), required=False,
        choices=[("", gettext_lazy("None: its queues admit"))]
        + [(policy, policy) for policy in STOP_POLICIES],
        help_text=gettext_lazy(
            "Hold: nothing new is admitted below this node, running jobs go on. HoldAndDrain: "
            "and its running jobs are preempted back to their queues. Preview shows them."
        ),
    )  # fmt: skip
    limits_text = forms.CharField(
        label=gettext_lazy("Job limits"), widget=forms.Textarea(attrs={"rows": 4}),
        required=False, help_text=LIMITS_HELP,
    )  # fmt: skip

    half_life_text = forms.CharField(
        label=gettext_lazy("Fair-sharing half-life"), required=False, max_length=32,
        help_text=gettext_lazy(
            "The root only. Empty: off, spare capacity goes by usage now. Set (7d is a good "
            "start): a department that used more than its share lately borrows after those "
            "that used less, and gives back first."
        ),
    )  # fmt: skip

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.instance.editing_form = self
        self.fields["stop_policy"].initial = self.instance.stop_policy
        self.fields["limits_text"].initial = "\n".join(limits_lines(self.instance.limits))
        if self.instance.parent_id is not None:  # the tree's half-life is set on its root
            del self.fields["half_life_text"]
            return
        del self.fields["weight"]  # the root has no siblings to share with
        half_life = self.instance.half_life
        self.fields["half_life_text"].initial = (
            fairness.format_half_life(half_life) if half_life is not None else ""
        )

    def clean(self):
        cleaned = super().clean()
        try:
            limits = parse_limits_text(cleaned.get("limits_text", ""))
        except forms.ValidationError as error:
            self.add_error("limits_text", error)
            self.values = None
            return cleaned
        if self.values is not None:
            self.values["half_life"] = cleaned.get("half_life_text", "").strip()
            self.values["stop"] = cleaned.get("stop_policy", "")
            self.values["limits"] = limits
        return cleaned


class ChildForm(NodeValuesForm):
    name = forms.CharField(
        max_length=63,
        help_text=gettext_lazy("Renaming moves the node: its old path and queue are retired."),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Four columns side by side: keep each one narrow.
        for field in ("min_text", "max_text"):
            self.fields[field].widget.attrs.update(rows=3, cols=24)
        self.fields["namespaces_text"].widget.attrs["size"] = 16
        self.fields["name"].widget.attrs["size"] = 16
        # The row's node as the tree has it now; cleaning sets the instance's new name.
        self.original_name = self.instance.name if self.instance.pk else None
        self.fields["name"].initial = self.original_name

    def clean(self):
        cleaned = super().clean()
        if self.values is not None:
            self.values["name"] = cleaned.get("name", "")
        return cleaned


# The node page's "Preview the change" button, and the formset's way of stopping the save
# to show the preview (the admin renders the page again; it is not an error to show).
PREVIEW_ASKED = "_preview"
PREVIEW_CODE = "preview"
PREVIEW_SHOWN = gettext_lazy("Nothing was saved yet: check what saving would do, then save.")
MAX_PREVIEWED = 10_000  # job ids sent back with a save; more are not read


def previewed_ids(keys: list[str]) -> set[int]:
    """The jobs the preview the person saw would preempt, as the page sent them back."""
    return {int(key) for key in keys[:MAX_PREVIEWED] if key.isdigit() and len(key) < 19}


class ChildrenFormSet(forms.BaseInlineFormSet):
    """The children of a node. ``clean`` checks the node and its children as one tree, and
    leaves the document to apply in ``document``; the admin's save what it changed in
    ``applied``. It also previews the change (``preview``) and stops the save to show it
    when asked, or when the change would preempt jobs the person was not shown
    (``grown``)."""

    applied: list[services.NodeChange]
    preview: dict | None = None
    grown: list[dict] = []

    def add_fields(self, form, index) -> None:
        """Each field of a row named for screen readers by its column and its child: the
        table's columns head the fields only for the eye."""
        super().add_fields(form, index)
        child = form.instance.name if form.instance.pk else _("the new child")
        for field in form.fields.values():
            label = _("Delete") if field.label is None else field.label
            field.widget.attrs["aria-label"] = _("%(field)s of %(child)s") % {
                "field": label,
                "child": child,
            }

    def clean(self) -> None:
        super().clean()
        self.document: dict | None = None
        node_form: QuotaNodeForm = self.instance.editing_form
        rows = [form for form in self.forms if form.instance.pk or form.has_changed()]
        # BaseFormSet's own test, which the stub leaves out.
        deleted = [form for form in rows if self._should_delete_form(form)]  # type: ignore[attr-defined]
        if node_form.values is None or any(form.errors for form in rows if form not in deleted):
            return  # the messages on the rows come first
        try:
            document, owners = self._compose(node_form, rows, deleted)
        except services.TreeError as error:  # the node left the tree since the page was shown
            raise forms.ValidationError(str(error)) from None
        try:
            services.tree_check(document=document)
        except services.TreeError as error:
            for key, reasons in error.errors.items():
                for reason in reasons:
                    _route(key, reason, owners, node_form)
            raise forms.ValidationError(
                _(
                    "Nothing was saved: the change would break the rules of the tree at "
                    "%(path)s (see the messages in place)."
                )
                % {"path": self.instance.path}
            ) from None
        self.document = document
        # What saving would do, by the admission rule: shown instead of saving when the
        # person asked for it, or when it would preempt jobs they were not shown.
        preview = signals.tree_preview(QuotaNode, document)
        if preview is not None:
            seen = previewed_ids(cast(QueryDict, self.data).getlist("previewed"))
            asked = PREVIEW_ASKED in self.data  # a preview of its own: nothing is "more"
            self.grown = [
                job
                for job in preview["preempted"]
                if job["by_the_change"] and job["job"] not in seen and not asked
            ]
            if asked or self.grown:
                self.preview = preview
                raise forms.ValidationError(PREVIEW_SHOWN, code=PREVIEW_CODE)

    def _compose(self, node_form, rows, deleted) -> tuple[dict, dict]:
        """The active tree with this node's and its children's new values, and which form
        owns which node (by field prefix and by path), to put each message in place."""
        document = services.tree_export()
        path = self.instance.path
        node = services.tree_find(document, path)
        _set_quota(node, node_form.values["min"], node_form.values["max"])
        _set_weight(node, node_form.values["weight"])
        _set_limits(node, node_form.values["stop"], node_form.values["limits"])
        if self.instance.parent_id is None:
            _set_half_life(document, node_form.values.get("half_life", ""))
        children: list[dict] = list(node.get("children", []))
        placed: list[tuple[dict, ChildForm]] = []
        retiring: list[ChildForm] = []
        for form in rows:
            old = next((kid for kid in children if kid["name"] == form.original_name), None)
            if form in deleted:
                if old is not None:
                    children.remove(old)
                    retiring.append(form)
                continue
            kid = old if old is not None else {}
            if old is None:
                children.append(kid)
            values = form.values
            kid["name"] = values["name"]
            _set_quota(kid, values["min"], values["max"])
            _set_namespaces(kid, values["namespaces"])
            _set_weight(kid, values["weight"])
            placed.append((kid, form))
        if children:
            node["children"] = children
        else:
            node.pop("children", None)
        _set_namespaces(node, node_form.values["namespaces"])
        prefix = _field_prefix(document, path)
        owners = {"prefix": {prefix: node_form}, "path": {path: node_form}}
        for form in retiring:  # a refused retirement shows on the row that asked for it
            owners["path"][f"{path}/{form.original_name}"] = form
        for kid, form in placed:
            # By identity: two new rows may hold equal values (a name written twice).
            index = next(i for i, other in enumerate(children) if other is kid)
            owners["prefix"][f"{prefix}.children[{index}]"] = form
            owners["path"][f"{path}/{kid['name']}"] = form
        return document, owners


def _set_quota(node: dict, low: dict[str, str], high: dict[str, str]) -> None:
    """A node's min and max as the form's lines say them: totals in ``min`` and ``max``, a
    pool's share (``nvidia.com/gpu@h100``) under ``pools``, as the tree's YAML keeps them."""
    node["min"], node["max"] = {}, {}
    shares: dict[str, dict[str, dict[str, str]]] = {}
    for key, said in (("min", low), ("max", high)):
        for name, value in said.items():
            resource, mark, pool = name.partition(POOL_MARK)
            if mark:
                shares.setdefault(pool, {"min": {}, "max": {}})[key][resource] = value
            else:
                node[key][name] = value
    if shares:
        node["pools"] = shares
    else:
        node.pop("pools", None)


def _set_namespaces(node: dict, namespaces: list[str]) -> None:
    """Leaves carry their namespaces; a node with children has none, and naming some on it
    leaves them in place for the tree's check to refuse with the node's path."""
    if node.get("children") and not namespaces:
        node.pop("namespaces", None)
    else:
        node["namespaces"] = namespaces


def _set_weight(node: dict, weight: float) -> None:
    """A weight other than 1 is written; 1 is the default, and the document leaves it out."""
    if weight == 1.0:
        node.pop("weight", None)
    else:
        node["weight"] = weight


def _set_limits(node: dict, stop: str, limits: dict) -> None:
    """The node's stopPolicy and limits, left out of the document when it has none."""
    for key, value in (("stopPolicy", stop), ("limits", limits)):
        if value:
            node[key] = value
        else:
            node.pop(key, None)


def _set_half_life(document: dict, text: str) -> None:
    if text:
        document["spec"]["fairSharing"] = {"halfLife": text}
    else:
        document["spec"].pop("fairSharing", None)


def _field_prefix(document: dict, path: str) -> str:
    """``root/algorithm/video`` -> ``spec.root.children[0].children[0]``, as the parser says."""
    prefix, node = "spec.root", document["spec"]["root"]
    for name in path.split("/")[1:]:
        index = next(i for i, kid in enumerate(node["children"]) if kid["name"] == name)
        prefix, node = f"{prefix}.children[{index}]", node["children"][index]
    return prefix


def _route(key: str, reason: str, owners: dict, node_form: forms.BaseForm) -> None:
    """Put a message of the tree's checks on the form of the node it concerns.

    Parse errors carry a field path (``spec.root.children[0].max.cpu``): the longest owner
    prefix gives the row, the next part the field. Broken invariants and refused retirements
    name a node path first: the nearest owner at or above it gets them. The rest, like a
    namespace bound twice, go to the node's own form; each message names its nodes.
    """
    if key.startswith("spec.fairSharing") and "half_life_text" in node_form.fields:
        node_form.add_error("half_life_text", reason)
        return
    by_prefix = owners["prefix"]
    for prefix in sorted(by_prefix, key=len, reverse=True):
        if key.startswith(prefix + "."):
            form = by_prefix[prefix]
            part, _dot, rest = key[len(prefix) + 1 :].partition(".")
            field = TEXT_FIELDS.get(part, part)
            message = f"{rest}: {reason}" if rest else reason
            if field in form.fields:
                form.add_error(field, message)
            else:
                form.add_error(None, f"{part}{'.' + rest if rest else ''}: {reason}")
            return
    subject = reason.removeprefix("cannot retire ").split(":", 1)[0]
    by_path = owners["path"]
    for path in sorted(by_path, key=len, reverse=True):
        if subject == path or subject.startswith(path + "/"):
            by_path[path].add_error(None, reason)
            return
    node_form.add_error(None, reason if key == "spec.root" else f"{key}: {reason}")
