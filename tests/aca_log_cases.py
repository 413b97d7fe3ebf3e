# ruff: noqa: E501  (log lines are quoted as they appear)
"""Real Azure Container Apps lines of the ACA-only kinds, as the ACA adapter gives them (a system event as
"<Reason>: <Log>"), each from where it was reported (tests/test_diagnose_kinds.py runs them with every other kind: each
case gives exactly its kind). More samples, with their manifests, are in tests/data/aca_logs*."""

from __future__ import annotations

ACA_CASES: dict[str, list[list[str | tuple]]] = {
    "aca_image_pull_failed": [
        [  # yeongseon/azure-container-apps-practical-guide, ACR private-endpoint lab (system log rows)
            ("INFO", "PullingImage: Pulling image 'acracrpedir27qail.azurecr.io/pe-lab:v-broken'"),
            ("WARNING", "ImagePullUnauthorized: Container pull image failed with unauthorized error."),
            (
                "WARNING",
                "ContainerTerminated: Container 'app' was terminated with exit code '' and reason 'ImagePullFailure'",
            ),
        ],
        [  # Azure-Samples/container-apps-store-api-microservice#33
            'Failed to pull image "ghcr.io/danwahlin/container-apps-store-api-microservice/node-service:sha-ac6a0a4": rpc error: code = Unknown desc = failed to pull and unpack image "ghcr.io/danwahlin/container-apps-store-api-microservice/node-service:sha-ac6a0a4": failed to resolve reference "ghcr.io/danwahlin/container-apps-store-api-microservice/node-service:sha-ac6a0a4": failed to authorize: failed to fetch oauth token: unexpected status: 403 Forbidden',
            "Error: ErrImagePull",
        ],
    ],
    "aca_workload_profile_missing": [
        [  # Azure/azure-cli#30526
            ("ERROR", "(WorkloadProfileInvalidType) Workload profile type 'CONSUMPTION_GPU_NC8AS_T4' is invalid."),
        ],
        [  # an ACA flex-profile note (public-code index file 67591519841): the app's workloadProfileName vs the environment's
            "The managed env's `workloadProfiles[*].name` is the value you reference from `containerApps.properties.workloadProfileName`. Mismatch → `WorkloadProfileNotFound`.",
        ],
    ],
}
