"""The project's APIs, its service accounts and its role grants: Pulumi inputs -> Service Usage, IAM, Resource Manager.

- An API: resource_google_project_service.go `resourceGoogleProjectServiceCreate`
  enables it through `BatchRequestEnableService`, which batches the stack's
  services into one `serviceusage.services.batchEnable` (v1) per project
  (resource_google_project.go `doEnableServicesRequest`; a lone service goes
  to `services.enable` instead). The resource's item of the batch is judged.
- A service account: resource_google_service_account.go
  `resourceGoogleServiceAccountCreate`, `iam.projects.serviceAccounts.create` (v1).
- A project role grant: a read-modify-write of the project's IAM policy
  (resource_iam_member.go `resourceIamMemberCreate`), set by iam_project.go
  `ProjectIamUpdater.SetResourceIamPolicy` with Resource Manager v1's
  `projects.setIamPolicy`; the binding the program adds is judged.
"""

from __future__ import annotations

from admission.google_api.rules import Field, NotSent, Param, ResourceMapping, last_segment

SERVICE = ResourceMapping(
    type="gcp:projects/service:Service",
    api="serviceusage.v1",
    method="serviceusage.services.batchEnable",
    params={"parent": "projects/{project}"},
    source="resource_google_project.go doEnableServicesRequest (BatchEnableServicesRequest)",
    fields={
        "project": Param("project"),
        "service": Field("serviceIds[0]", source="resource_google_project.go doEnableServicesRequest"),
        "disableOnDestroy": NotSent("the provider disables the API on destroy when it is true"),
        "disableDependentServices": NotSent("sent only when the provider disables the API on destroy"),
    },
)

SERVICE_ACCOUNT = ResourceMapping(
    type="gcp:serviceaccount/account:Account",
    api="iam.v1",
    method="iam.projects.serviceAccounts.create",
    params={"name": "projects/{project}"},
    source="resource_google_service_account.go resourceGoogleServiceAccountCreate",
    fields={
        "project": Param("project"),
        # iam.CreateServiceAccountRequest{AccountId, ServiceAccount{DisplayName, Description}}.
        "accountId": Field("accountId"),
        "displayName": Field("serviceAccount.displayName",
                             source="resource_google_service_account.go resourceGoogleServiceAccountCreate"),
        "disabled": NotSent("no effect during creation (its docstring)"),
    },
)

PROJECT_IAM_MEMBER = ResourceMapping(
    type="gcp:projects/iAMMember:IAMMember",
    api="cloudresourcemanager.v1",
    method="cloudresourcemanager.projects.setIamPolicy",
    params={"resource": "{project}"},
    source="iam_project.go ProjectIamUpdater.SetResourceIamPolicy (resource_iam_member.go resourceIamMemberCreate)",
    fields={
        "project": Param("project"),
        "role": Field("policy.bindings[0].role"),
        "member": Field("policy.bindings[0].members[0]", source="resource_iam_member.go getResourceIamMember"),
    },
)


# The Hugging Face token's readers (components/token_access.py): a binding added to the secret's policy
# (iam_secret_manager_secret.go SecretManagerSecretIamUpdater.SetResourceIamPolicy).
SECRET_IAM_MEMBER = ResourceMapping(
    type="gcp:secretmanager/secretIamMember:SecretIamMember",
    api="secretmanager.v1",
    method="secretmanager.projects.secrets.setIamPolicy",
    params={"resource": "projects/{project}/secrets/{secret}"},
    source="iam_secret_manager_secret.go SecretManagerSecretIamUpdater.SetResourceIamPolicy",
    fields={
        "project": Param("project"),
        # The secret's id or its full name (SecretManagerSecretIdParseFunc).
        "secretId": Param("secret", last_segment),
        "role": Field("policy.bindings[0].role"),
        "member": Field("policy.bindings[0].members[0]", source="resource_iam_member.go getResourceIamMember"),
    },
)
