"""A diff as one self-contained HTML page: the range tree coloured by change, beside the table."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from autonvtx.report.diff import Diff, DiffRow
from autonvtx.report.gather import describe

_MAX_NODES = 20000
_PREFIX = re.compile(r"[^:]+:(?!:)")

# The page is the window (as report's page is): the header takes what it needs, the tree and the
# table share the rest and scroll inside themselves; the table's number columns take what their
# figures need and the name column the rest, cut with a title.
STYLE = """
html,body{height:100%}
body{font:13px/1.4 system-ui,sans-serif;margin:0;color:#222;display:flex;flex-direction:column}
header{flex:none;padding:8px 14px;border-bottom:1px solid #ddd}h1{font-size:16px;margin:0 0 4px;overflow-wrap:anywhere}
#counts span{margin-right:12px}#domain{color:#555}
main{flex:1 1 auto;min-height:0;display:flex;gap:12px;padding:10px 14px;box-sizing:border-box}
#tree-pane{flex:1 1 0;min-width:0;overflow:auto}
#table-pane{flex:0 0 auto;width:clamp(640px,56%,980px);align-self:flex-start;max-height:100%;overflow:auto;box-sizing:border-box}
td.name,th.name{max-width:0;width:100%;overflow:hidden;text-overflow:ellipsis}table{min-width:620px}
@media (max-width:1100px){main{flex-direction:column}#tree-pane{flex:0 0 auto;max-height:45vh}
#table-pane{flex:1 1 auto;width:auto;align-self:stretch;min-height:200px}}
.node{margin-left:16px}.box{display:flex;align-items:center;gap:6px;margin:1px 0;padding:1px 4px;border-radius:3px;
white-space:nowrap;overflow:hidden;cursor:default}.box .bar{height:10px;border-radius:2px;flex:none}
.box .name{overflow:hidden;text-overflow:ellipsis}.box .pct{color:#444;font-variant-numeric:tabular-nums}
.slower{background:#fde0dc}.faster{background:#dcf5e3}.same{background:#f1f1f1}.new{background:#dde8fb}.gone{background:#eadcf7}
table{border-collapse:collapse;width:100%}th,td{padding:2px 6px;white-space:nowrap;border-bottom:1px solid #eee;text-align:right}
th{cursor:pointer;position:sticky;top:0;background:#fafafa}td.name,th.name{text-align:left}
#legend span{padding:1px 6px;margin-right:6px;border-radius:3px}
"""

SCRIPT = r"""
(function(){
const data=JSON.parse(document.getElementById('diff-data').textContent);
const fmt=ns=>{const a=Math.abs(ns);if(a>=1e9)return (ns/1e9).toFixed(3)+' s';if(a>=1e6)return (ns/1e6).toFixed(3)+' ms';
if(a>=1e3)return (ns/1e3).toFixed(3)+' us';return Math.round(ns)+' ns';};
const pct=v=>v===null?'':(v>0?'+':'')+v.toFixed(1)+'%';
document.getElementById('title').textContent='autonvtx diff: '+data.base+'  \u2192  '+data.new;
document.getElementById('test').textContent=data.test;
if(data.domain)document.getElementById('domain').textContent='all ranges in '+(/^domain \d+$/.test(data.domain)?'':'domain ')+data.domain;
const counts=document.getElementById('counts');
for(const [k,v] of Object.entries(data.counts)){const s=document.createElement('span');s.className=k;s.textContent=v+' '+k;counts.appendChild(s);}
// The tree: rows arrive in tree order, each with its path; a node's bar is its larger side's time.
const root={children:[],el:document.getElementById('tree')};const byPath=new Map([['',root]]);
const widest=Math.max(1,...data.tree.map(r=>Math.max(r.base,r.new)));
for(const r of data.tree){
  const parent=byPath.get(r.path.slice(0,-1).join('\u0000'))||root;
  const node=document.createElement('div');node.className='node';
  const box=document.createElement('div');box.className='box '+r.verdict;
  box.dataset.verdict=r.verdict;box.dataset.path=r.path.join(' > ');box.dataset.change=r.change;
  box.title=r.path.join(' > ')+'\n'+r.verdict+' ('+r.metric+'): '+fmt(r.base)+' \u2192 '+fmt(r.new)+' '+pct(r.pct)+(r.p===null?'':'  p='+r.p.toPrecision(3));
  const bar=document.createElement('span');bar.className='bar';
  bar.style.width=(100*Math.max(r.base,r.new)/widest).toFixed(3)+'px';
  bar.style.background=colour(r);
  const name=document.createElement('span');name.className='name';name.textContent=r.path[r.path.length-1];
  const change=document.createElement('span');change.className='pct';change.textContent=pct(r.pct)||r.verdict;
  box.append(bar,name,change);node.appendChild(box);parent.el.appendChild(node);
  byPath.set(r.path.join('\u0000'),{el:node});
}
function colour(r){
  if(r.verdict==='new')return 'rgb(60,110,220)';if(r.verdict==='gone')return 'rgb(140,80,200)';
  if(r.verdict==='same')return 'rgb(160,160,160)';if(r.verdict==='unclear')return 'rgb(215,190,110)';
  const strength=Math.min(1,Math.abs(r.pct===null?100:r.pct)/50);const c=Math.round(200-120*strength);
  return r.verdict==='slower'?'rgb(230,'+c+','+c+')':'rgb('+c+',190,'+c+')';
}
// The table, sortable by any column.
const cols=[['Range','name'],['Verdict','verdict'],['Metric','metric'],['Base','base'],['New','new'],['Change','change'],['Change %','pct'],['p','p'],['Inst','inst']];
const thead=document.querySelector('#table thead'),tbody=document.querySelector('#table tbody');
const tr=document.createElement('tr');
cols.forEach(([label,key])=>{const th=document.createElement('th');th.textContent=label;if(key==='name')th.className='name';
th.dataset.column=label;th.onclick=()=>draw(key);tr.appendChild(th);});thead.appendChild(tr);
let order={key:null,desc:true};
function draw(key){
  if(key){order={key,desc:order.key===key?!order.desc:true};}
  const rows=data.rows.slice();
  if(order.key){rows.sort((a,b)=>{const x=a[order.key],y=b[order.key];const c=(x===null)-(y===null)||(x<y?-1:x>y?1:0);return order.desc?-c:c;});}
  tbody.textContent='';
  for(const r of rows){
    const row=document.createElement('tr');row.dataset.name=r.name;row.dataset.verdict=r.verdict;row.className=r.verdict;
    const cells=[r.name,r.verdict,r.metric,fmt(r.base),fmt(r.new),(r.change>0?'+':'')+fmt(r.change),pct(r.pct),
      r.p===null?'':r.p.toPrecision(3),r.inst];
    cells.forEach((v,i)=>{const td=document.createElement('td');td.textContent=v;if(i===0){td.className='name';td.title=v;}row.appendChild(td);});
    tbody.appendChild(row);
  }
}
draw(null);
})();
"""


def _record(row: DiffRow, with_path: bool) -> dict[str, Any]:
    base = row.base.gpu_ns if row.metric == "gpu" else row.base.cpu_ns
    new = row.new.gpu_ns if row.metric == "gpu" else row.new.cpu_ns
    pct = row.change_pct
    found: dict[str, Any] = {
        "name": row.name,
        "verdict": row.verdict,
        "metric": row.metric,
        "base": base,
        "new": new,
        "change": row.change_ns,
        "pct": None if pct is None else round(pct, 3),
        "p": row.p_value,
        "inst": f"{row.base.instances:g} \u2192 {row.new.instances:g}",
    }
    if with_path:
        path = list(row.key) if row.group else list(row.path)
        found["path"] = path
    return found


def shared_prefix(names: Iterable[str]) -> str:
    """The "domain:" every name opens with, if they all open with the same one (else "").

    A name's prefix runs to its first colon that is not part of "::" (aten::add has none); a
    name must keep something after it. Names with differing prefixes, or none, keep theirs.
    """
    found: str | None = None
    for name in names:
        match = _PREFIX.match(name)
        prefix = match.group(0) if match and len(name) > match.end() else ""
        if not prefix or (found is not None and prefix != found):
            return ""
        found = prefix
    return found or ""


def _drop_prefix(prefix: str, records: list[dict[str, Any]], groups: int) -> None:
    cut = len(prefix)
    for record in records:
        record["name"] = record["name"][cut:]
        if "path" in record:
            path = record["path"]
            record["path"] = path[:groups] + [part[cut:] for part in path[groups:]]


def render_diff_page(diff: Diff, rows: Sequence[DiffRow], tree_rows: Sequence[DiffRow]) -> str:
    tree = [_record(row, True) for row in tree_rows[:_MAX_NODES]]
    table = [_record(row, diff.tree) for row in rows]
    # Group names ("python3 (pid 144)") head the paths of --by pages: they are not ranges.
    groups = 1 if any(row.group for row in [*rows, *tree_rows]) else 0
    names = [r["name"] for r in table] + [part for r in tree for part in r["path"][groups:]]
    prefix = shared_prefix(names)
    if prefix:
        _drop_prefix(prefix, tree, groups)
        _drop_prefix(prefix, table, groups)
    data = {
        "base": describe(diff.base_files),
        "new": describe(diff.new_files),
        "test": diff.test,
        "counts": diff.counts(),
        "domain": prefix[:-1],
        "tree": tree,
        "rows": table,
        "notes": diff.notes,
    }
    # "</" inside a <script> would end it early; JSON allows "\/" for "/".
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    title = html.escape(f"autonvtx diff: {data['base']} -> {data['new']}")
    legend = "".join(f'<span class="{v}">{v}</span>' for v in ("slower", "faster", "same", "new", "gone"))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{title}</title>'
        f"<style>{STYLE}</style></head><body>"
        f'<script type="application/json" id="diff-data">{payload}</script>'
        '<header><h1 id="title"></h1><div id="domain"></div><div id="test"></div><div id="counts"></div>'
        f'<div id="legend">{legend}</div></header>'
        '<main><section id="tree-pane"><div id="tree"></div></section>'
        '<section id="table-pane"><table id="table"><thead></thead><tbody></tbody></table></section></main>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )
