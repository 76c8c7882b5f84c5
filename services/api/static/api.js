// The API, read with the tab's bearer tokens: the viewer (or operator) token
// given at sign-in, and an operator token asked for only when an action needs
// one. Both live in sessionStorage (this tab only), never in the page or URL.

const TOKEN_KEY = "settleq.token";
const OPERATOR_KEY = "settleq.operator";

export class Unauthorized extends Error {}
export class Forbidden extends Error {}

export const token = () => sessionStorage.getItem(TOKEN_KEY);
export const setToken = (value) => sessionStorage.setItem(TOKEN_KEY, value);
export const setOperatorToken = (value) => sessionStorage.setItem(OPERATOR_KEY, value);
export const hasOperatorToken = () => Boolean(sessionStorage.getItem(OPERATOR_KEY));
export const clearOperatorToken = () => sessionStorage.removeItem(OPERATOR_KEY);
export function forget() {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(OPERATOR_KEY);
}

async function send(path, { method = "GET", body, asOperator = false, accept = "application/json" } = {}) {
  const bearer = (asOperator && sessionStorage.getItem(OPERATOR_KEY)) || token();
  const headers = { Authorization: `Bearer ${bearer}`, Accept: accept };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  if (response.status === 401) throw new Unauthorized();
  if (response.status === 403) throw new Forbidden();
  if (!response.ok) {
    const error = await response.json().catch(() => null);
    const detail = error?.error ? `${error.error.code}: ${error.error.message}` : `HTTP ${response.status}`;
    throw new Error(detail);
  }
  return response;
}

export const api = async (path, options) => (await send(path, options)).json();

// A file the API answers with (a CSV, a 997), saved from the response: a plain
// link could not carry the bearer token.
export async function download(path, filename, accept = "text/csv") {
  const blob = await (await send(path, { accept })).blob();
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}
