// HTML escaping in the webviews: the same function the page builder uses (one definition, in src/core).
export { escapeHtml } from '../../src/core/base/protocol/escape';
