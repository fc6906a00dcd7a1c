// src/viz/attention_page_assets.h - the attention viewer's CSS, HTML body and JavaScript, inlined
// into every page (attention_page.cpp). The script reads the JSON in <script id="qkv-data">.
#pragma once

namespace qkv::viz::detail {

extern const char* const kAttentionPageCss;
extern const char* const kAttentionPageBody;
extern const char* const kAttentionPageJs;

}  // namespace qkv::viz::detail
