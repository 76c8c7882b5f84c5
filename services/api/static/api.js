// The API, read with the browser session's bearer tokens: the viewer (or
// operator) token given at sign-in, and an operator token asked for only when
// an action needs one. They live in sessionStorage, shared with the session's
// other tabs of the dashboard (a tab opened later asks the open ones), or, when
// the user chose "remember on this device", in localStorage too; never in the
// page or a URL. Signing out forgets them in every tab.

const TOKEN_KEY = "settleq.token";
const OPERATOR_KEY = "settleq.operator";
const channel = typeof BroadcastChannel === "function" ? new BroadcastChannel("settleq.tokens") : null;

export class Unauthorized extends Error {}
export class Forbidden extends Error {}
// Another refusal, with the API's error code and details kept apart from its
// words: a page may show or test the code itself (`contract_invalid`).
export class Refused extends Error {
  constructor(status, error) {
    super(error ? `${error.code}: ${error.message}` : `HTTP ${status}`);
    this.status = status;
    this.code = error?.code ?? null;
    this.reason = error?.message ?? null;
    this.details = error?.details ?? [];
  }
}

const stored = (key) => sessionStorage.getItem(key) || localStorage.getItem(key);
const remembered = () => Boolean(localStorage.getItem(TOKEN_KEY));

export const token = () => stored(TOKEN_KEY);
export function setToken(value, remember = false) {
  sessionStorage.setItem(TOKEN_KEY, value);
  if (remember) localStorage.setItem(TOKEN_KEY, value);
}
export function setOperatorToken(value) {
  sessionStorage.setItem(OPERATOR_KEY, value);
  if (remembered()) localStorage.setItem(OPERATOR_KEY, value);
}
export const hasOperatorToken = () => Boolean(stored(OPERATOR_KEY));
// A page's form asking for an operator token: its one input is taken (and
// cleared), then the page shown again with it.
export function operatorTokenForm(form, show) {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const input = form.querySelector("input");
    setOperatorToken(input.value.trim());
    input.value = "";
    show();
  });
}
export function clearOperatorToken() {
  sessionStorage.removeItem(OPERATOR_KEY);
  localStorage.removeItem(OPERATOR_KEY);
}
export function forget(everywhere = true) {
  for (const storage of [sessionStorage, localStorage]) {
    storage.removeItem(TOKEN_KEY);
    storage.removeItem(OPERATOR_KEY);
  }
  if (everywhere && channel) channel.postMessage({ forget: true });
}

// Tokens shared between the session's tabs: a tab without one asks, a tab with
// one answers; ``onTokens`` is called when an answer (or a sign-out) arrives.
export function shareTokens(onTokens, onForget) {
  if (!channel) return;
  channel.onmessage = ({ data }) => {
    if (data.ask && token()) {
      channel.postMessage({ token: token(), operator: stored(OPERATOR_KEY) });
    } else if (data.token && !token()) {
      sessionStorage.setItem(TOKEN_KEY, data.token);
      if (data.operator) sessionStorage.setItem(OPERATOR_KEY, data.operator);
      onTokens();
    } else if (data.forget) {
      forget(false);
      onForget();
    }
  };
  if (!token()) channel.postMessage({ ask: true });
}

// ``json``: a body already serialized, sent as typed: a pasted contract's
// decimals would be floats once through JSON.parse and JSON.stringify.
async function send(path, { method = "GET", body, json, asOperator = false, accept = "application/json" } = {}) {
  const bearer = (asOperator && stored(OPERATOR_KEY)) || token();
  const headers = { Authorization: `Bearer ${bearer}`, Accept: accept };
  const payload = json ?? (body === undefined ? undefined : JSON.stringify(body));
  if (payload !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: payload, cache: "no-store" });
  if (response.status === 401) throw new Unauthorized();
  if (response.status === 403) throw new Forbidden();
  if (!response.ok) {
    const error = await response.json().catch(() => null);
    throw new Refused(response.status, error?.error);
  }
  return response;
}

export const api = async (path, options) => (await send(path, options)).json();

// Whether this tab may act as an operator: an operator token given here, or
// the sign-in token is an operator's (it is then kept as this tab's operator
// token). Asked of GET /v1/dashboard/role, which any reader may read: probing
// an operator endpoint left a viewer's console a 403 error each time.
export async function mayOperate() {
  if (hasOperatorToken()) return true;
  try {
    const { role } = await api("/v1/dashboard/role");
    if (role !== "operator") return false;
    setOperatorToken(token());
    return true;
  } catch (error) {
    if (error instanceof Forbidden || error instanceof Unauthorized) return false;
    throw error;
  }
}

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
