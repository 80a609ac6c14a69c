// VS Code theme colours for drawing (canvas strokes, chart series): the --vscode-* CSS variables VS Code sets
// on the webview's body, with a fallback for a page outside VS Code (the Chromium tests' harness).
export function themeColor(name: string, fallback: string): string {
  const v = getComputedStyle(document.body).getPropertyValue(name).trim();
  return v || fallback;
}
