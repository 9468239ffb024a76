// CertificateSigningRequests (certificates.k8s.io/v1) as kube-apiserver's registry and
// kube-controller-manager's csrsigning controller handle them:
// - create (csrStrategy.PrepareForCreate): spec.username, uid, groups and extra come from the
//   authenticated caller whatever the body says; status starts empty.
// - validation (ValidateCertificateSigningRequestCreate/Update): spec.request a PEM
//   CERTIFICATE REQUEST whose signature verifies, spec.signerName a qualified
//   `domain/path`, spec.usages non-empty, known and unique, expirationSeconds >= 600;
//   conditions: types unique, Approved/Denied/Failed only "True", Approved and Denied
//   exclusive, none removed; Approved/Denied added only through /approval, status.certificate
//   set only through /status and never changed once set.
// - updates: the main resource changes neither spec nor status, /status only status, /approval
//   only status.conditions; conditions get lastUpdateTime/lastTransitionTime when unset.
// - the signer (csr_signer.cc) for kubernetes.io/kube-apiserver-client,
//   kube-apiserver-client-kubelet and kubelet-serving: once Approved, it issues status.certificate
//   from the cluster CA with the request's subject, SANs and usages for spec.expirationSeconds
//   (default and maximum one year, as --cluster-signing-duration), or adds a Failed condition
//   (SignerValidationFailure) when the request does not fit the signer's rules.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "tests/kubesim/rbac/rbac.h"
#include "tests/kubesim/server/pki.h"
#include "tests/kubesim/store/store.h"
#include "tests/kubesim/validation/validation.h"

namespace ekco::kubesim::csr {

bool isCsr(const ResourceInfo& r);

// csrStrategy.PrepareForCreate. `user` null (a Store call outside a request): the fields are
// cleared.
void prepareForCreate(nlohmann::json& csr, const UserInfo* user);

// The CSR rules of ValidateCertificateSigningRequestCreate (object metadata is the generic
// validator's).
std::vector<FieldError> validateCreate(const nlohmann::json& csr);

// PrepareForUpdate of the main resource ("") or of `status`/`approval`, then the update's
// validation. `next` is the body with the server's fields (for subresources: the stored object
// with the body's status); `now` an RFC 3339 time for unset condition times.
std::vector<FieldError> prepareUpdate(std::string_view subresource, nlohmann::json& next,
                                      const nlohmann::json& old, const std::string& now);

// The CertificateApproval admission plugin: approving or denying needs verb `approve` on
// `signers` (group certificates.k8s.io) named the signerName or `<domain>/*`. nullopt: allowed;
// else the 403 Forbidden reply.
std::optional<Reply> admitApproval(const RbacPolicy& policy, const UserInfo& user,
                                   const nlohmann::json& csr);

// The CertificateSigning admission plugin: a /status write that sets or changes
// status.certificate needs verb `sign` on the signer (or `<domain>/*`); 403 "user not permitted
// to sign requests with signerName ...".
std::optional<Reply> admitSigning(const RbacPolicy& policy, const UserInfo& user,
                                  const nlohmann::json& csr);

// The certificate the signer issues for an approved request, PEM; an error (its text becomes
// the Failed condition's message) when the request does not suit the signer.
[[nodiscard]] base::Result<std::string> sign(const nlohmann::json& csr, const Pki& pki,
                                             std::chrono::system_clock::time_point now);

// One pass of the csrsigning controller over the store: every approved, not denied or failed,
// not yet issued request for one of the three signers gets its certificate (or Failed) through
// the /status subresource.
void signerPass(Store& store, const Pki& pki, std::chrono::system_clock::time_point now);

}  // namespace ekco::kubesim::csr
