// The Kubernetes protobuf encoding of request bodies (`application/vnd.kubernetes.protobuf`).
//
// client-go's generated clients force protobuf for built-in types (Request.UseProtobufAsDefault:
// Content-Type protobuf, Accept "application/vnd.kubernetes.protobuf,application/json"), so
// kubectl's typed commands (`create namespace|configmap|secret|serviceaccount|deployment|role...`,
// `drain`'s evictions and deletions) send protobuf bodies. A server cannot negotiate them away:
// client-go 1.32 reacts to 415 Unsupported Media Type only for CBOR bodies
// (rest/client.go requestClientContentConfigProvider.UnsupportedMediaType), so a 415 would fail
// the command, and kube-apiserver accepts protobuf for every built-in type. kubesim therefore
// decodes them: the envelope (magic "k8s\0", then runtime.Unknown {typeMeta, raw}) and the raw
// message by the real schema of k8s.io/api v0.32 (protobuf_schema.inc, generated from the
// generated.proto files by tools/gen_protobuf_schema.py) into the JSON object the body encodes.
// Answers stay JSON, which every such client accepts.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ekco::kubesim::protobuf {

// Whether a Content-Type is the Kubernetes protobuf encoding.
bool isProtobuf(std::string_view content_type);

// The object a protobuf body encodes, with apiVersion and kind from its envelope. Errors (one
// line): not the envelope, malformed protobuf, a field the schema does not know, a kind outside
// the schema (ErrorCode::kNotFound: kubesim answers 415, as for a type without protobuf;
// the others are kParse, 400).
base::Result<nlohmann::json> decode(std::string_view body);

// The fields of `object` (a JSON body of a built-in kind of protobuf_schema.inc, by its
// apiVersion and kind) that its Go type does not have, named as kube-apiserver's strict decoder
// names them ("bogus", "spec.colour", "spec.containers[0].colour"), and removed from `object`, as
// decoding into the Go type drops them. Its metav1.Time and MicroTime fields are written back as
// that decoding does: UTC, "...Z" (api_time.h). nullopt when kubesim has no schema for the kind
// (nothing is checked, removed or rewritten).
std::optional<std::vector<std::string>> dropUnknownFields(nlohmann::json& object);

}  // namespace ekco::kubesim::protobuf
