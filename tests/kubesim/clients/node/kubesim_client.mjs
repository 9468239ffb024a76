// Shared helpers for the Node client tests: the official @kubernetes/client-node (1.x) configured
// from $KUBECONFIG, which tests/kubesim/clients/run points at a fresh kubesim.
import * as k8s from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';

export { k8s };

export function kubeConfig() {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(process.env.KUBECONFIG);
  return kc;
}

export function unique(prefix) {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

// The HTTP code of a failed call (client-node 1.x throws ApiException with .code).
export function codeOf(err) {
  return err?.code ?? err?.statusCode ?? err?.response?.statusCode;
}
