// Tooltips are position: fixed so the panel views' overflow never clips them; they flip to stay on screen.
export function placeTooltip(tip: HTMLElement, e: MouseEvent): void {
  tip.hidden = false;
  const gap = 14;
  const w = tip.offsetWidth;
  const hgt = tip.offsetHeight;
  const x = e.clientX + gap + w > window.innerWidth ? Math.max(0, e.clientX - gap - w) : e.clientX + gap;
  const y = e.clientY + gap + hgt > window.innerHeight ? Math.max(0, e.clientY - gap - hgt) : e.clientY + gap;
  tip.style.left = `${x}px`;
  tip.style.top = `${y}px`;
}
