// The snapshot panel's DOM and theme helpers are the shared ones (webview/common); this module keeps the
// tabs' `./dom` imports working.
export { clear, h } from '../common/dom';
export { themeColor } from '../common/theme';
