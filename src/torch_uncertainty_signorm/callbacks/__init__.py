"""Lightning callbacks for σNorm-Ensembles."""

from .member_ownership import MemberOwnershipCallback

__all__ = ["MemberOwnershipCallback"]
