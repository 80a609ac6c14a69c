// The one typed message contract between src/ (extension host) and webview/ (browser bundles).
// live.ts: the live panel (src/glue/live ↔ webview/live); snapshot.ts: the snapshot panel.
export * from './live';
export * from './snapshot';
export * from './backwardOf';
