"""Saying once that an exec plugin handed back the very credential the API server had just refused, for its token
(`credentials`) and its client certificate (`client_certificate`) alike.

Such a plugin answers from a cache of its own (`kubelogin`'s token cache, `tsh`'s certificates), or the refusal was
not the credential's (the API server's authenticator webhook down). The credential stays in use until the next
refusal, which runs the plugin again at most every `EXEC_RETRY_S` (`renewal_pace`): kept refused, every request
waited for a run. Without a word the calls just went on failing 401; the certificate path said nothing at all.
"""

from __future__ import annotations

import logging

from autoscaler.kube import renewal_pace

log = logging.getLogger("autoscaler.kube")


class RefusedAgain:
    """One plugin's credential: a WARNING the first time a run after a refusal hands the same one back, and
    again only after a run that hands out another."""

    def __init__(self, command: str, credential: str, refusal: str) -> None:
        """`command`: the plugin's (`plugin_command`); `credential`: "token", "client certificate"; `refusal`:
        how the API server refuses it, as "the API server ... the token" reads ("answers 401 Unauthorized to")."""
        self._command = command
        self._credential = credential
        self._refusal = refusal
        self._said = False

    def renewed(self, *, refused: bool, same: bool) -> None:
        """A run ended with a credential: the `same` one as in use, which the API server had `refused`."""
        if not (refused and same):
            self._said = False
            return
        if self._said:
            return
        log.warning("Kubernetes credentials: the API server %s the %s of the kubeconfig's exec plugin %s, and the "
                    "plugin handed out the same %s again (from a cache of its own, or the refusal is not the %s's: "
                    "the API server's authenticator); requests go on with it, and the plugin runs again after a "
                    "refusal at most every %s s. Run the plugin by hand to see the %s it gives, and clear its cache "
                    "or log in again", self._refusal, self._credential, self._command, self._credential,
                    self._credential, f"{renewal_pace.EXEC_RETRY_S:g}", self._credential)
        self._said = True
