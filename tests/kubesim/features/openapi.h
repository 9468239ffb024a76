// The OpenAPI documents kube-apiserver serves, for the kinds kubesim serves:
// - /openapi/v3 (the index of group-versions, each with a hash) and /openapi/v3/<gv> (its PATCH
//   operations and components.schemas): what `kubectl explain` reads, what kubectl's
//   --validate=strict asks (does PATCH take fieldValidation? then the server validates), what
//   `kubectl apply` builds its strategic merge patches from (x-kubernetes-patch-strategy and
//   -merge-key);
// - /openapi/v2, in JSON or, when asked (`Accept:
//   application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, as client-go's
//   OpenAPISchema() does), as gnostic's openapi_v2.Document in protobuf: what `kubectl explain
//   --output plaintext-openapiv2` and client-side validation read.
// The built-in kinds' schemas are generated from the type table the server decodes and validates
// with (api_types.h) and the patch strategies from the one it merges with (patch.h); custom
// resources' from their CRD's openAPIV3Schema. Kinds outside the table are objects with
// metadata and x-kubernetes-preserve-unknown-fields, which is what kubesim checks of them.
// There are no descriptions and no `required` lists (the table has neither).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/kubesim/store/store.h"

namespace ekco::kubesim::openapi {

// GET /openapi/v3: {"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=..."}}};
// the hash changes when the group-version's document does (a CRD added, changed or removed).
nlohmann::json v3Index(const std::vector<ResourceInfo>& all);

// GET /openapi/v3/api/<version> and /openapi/v3/apis/<group>/<version>; nullopt when kubesim
// serves no resource in that group-version (404).
std::optional<nlohmann::json> v3GroupVersion(const std::vector<ResourceInfo>& all,
                                             std::string_view group, std::string_view version);

// GET /openapi/v2 in JSON: every served kind's definitions and PATCH operations.
nlohmann::json v2Document(const std::vector<ResourceInfo>& all);

// The media type client-go asks /openapi/v2 for (the subtype with "@v1.0" or, newer, ".v1.0"),
// the one kube-openapi answers with (Go's mime parser refuses the "@"), and the v2 document in it.
inline constexpr std::string_view kV2ProtobufAccept =
    "application/com.github.proto-openapi.spec.v2";
inline constexpr std::string_view kV2ProtobufType =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
std::string v2Protobuf(const nlohmann::json& document);

}  // namespace ekco::kubesim::openapi
