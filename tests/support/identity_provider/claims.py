"""What the provider says of a user: the standard claims and a ``groups`` claim."""

from oidc_provider.lib.claims import ScopeClaims

# How the provider misbehaves, set through POST /control/ (urls.control).
FAULTS = {"audience": None, "unpublished_key": False}


def userinfo(claims, user):
    claims.update(
        preferred_username=user.username,
        email=user.email,
        given_name=user.first_name,
        family_name=user.last_name,
        name=f"{user.first_name} {user.last_name}".strip(),
    )
    return claims


class GroupClaims(ScopeClaims):
    info_groups = ("Groups", "The groups you belong to.")

    def scope_groups(self):
        return {"groups": sorted(self.user.groups.values_list("name", flat=True))}


def id_token_hook(id_token, user, token, request, **kwargs):
    if FAULTS["audience"]:
        id_token["aud"] = FAULTS["audience"]
    return id_token
