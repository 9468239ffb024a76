// The JSON types of the fields kube-apiserver decodes into Go structs, checked before anything
// is stored: a Node whose metadata.labels is a string, a Pod whose terminationGracePeriodSeconds
// is "x" or a Lease whose holderIdentity is 42 is refused with 400 BadRequest, as the real
// server's decoder refuses it, instead of being stored and breaking later reads, selectors and
// deletions (issue 24 defect 12). Checked: apiVersion, kind and every ObjectMeta field for all
// objects; for the built-in kinds kubesim or ekco read, the fields they read (Pod, Node,
// Deployment/StatefulSet/ReplicaSet/DaemonSet, Lease, ConfigMap, Secret, Event). Custom
// resources are schemaless here beyond their ObjectMeta. null is accepted wherever Go accepts
// it (it leaves the field unset).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace ekco::kubesim {

// nullopt when every checked field has its type; else the decoder's message, e.g.
// `json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type
// map[string]string`.
// Secret.data and ConfigMap.binaryData are []byte: their values must be standard base64 with
// padding (newlines ignored), as Go's encoding/json decodes them, else the message is Go's
// "illegal base64 data at input byte N".
std::optional<std::string> typeError(const nlohmann::json& object, const std::string& kind);

// Go's base64.StdEncoding.DecodeString: the bytes, or nullopt with *error set to
// "illegal base64 data at input byte N" (N as Go computes it).
std::optional<std::string> decodeBase64(std::string_view text, std::string* error);
std::string encodeBase64(std::string_view bytes);

}  // namespace ekco::kubesim
