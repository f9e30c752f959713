package htmldata_test

import (
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream/htmldata"
)

// The block and challenge pages below are written for these tests after
// the structure of the real ones (titles, ids, form actions, script and
// iframe sources); tokens and hosts are made up.

const cloudflareManaged = `<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title>
<meta http-equiv="Content-Type" content="text/html; charset=UTF-8"><meta name="robots" content="noindex,nofollow">
<meta name="viewport" content="width=device-width,initial-scale=1"><style>*{box-sizing:border-box;margin:0;padding:0}</style></head>
<body><div class="main-wrapper" role="main"><div class="main-content"><h1 class="zone-name-title h1">shop.example</h1>
<noscript><div class="h2"><span id="challenge-error-text">Enable JavaScript and cookies to continue</span></div></noscript></div></div>
<script>(function(){window._cf_chl_opt={cvId: '3',cZone: "shop.example",cType: 'managed',cRay: '8f0a1b2c3d4e5f60',
cH: 'Zx9', cUPMDTk: "\/p\/42?__cf_chl_tk=abc",cFPWv: 'g',cITimeS: '1700000000'};var cpo=document.createElement('script');
cpo.src='/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1?ray=8f0a1b2c3d4e5f60';
document.getElementsByTagName('head')[0].appendChild(cpo);}());</script></body></html>`

const cloudflareBlocked = `<!DOCTYPE html>
<!--[if lt IE 7]> <html class="no-js ie6 oldie" lang="en-US"> <![endif]-->
<!--[if gt IE 8]><!--> <html class="no-js" lang="en-US"> <!--<![endif]-->
<head><title>Attention Required! | Cloudflare</title><meta name="robots" content="noindex, nofollow" />
<link rel="stylesheet" id="cf_styles-css" href="/cdn-cgi/styles/cf.errors.css" /></head>
<body><div id="cf-wrapper"><div class="cf-alert cf-alert-error cf-cookie-error" id="cookie-alert" data-translate="enable_cookies">Please enable cookies.</div>
<div id="cf-error-details" class="cf-error-details-wrapper"><div class="cf-wrapper cf-header cf-error-overview">
<h1 data-translate="block_headline">Sorry, you have been blocked</h1>
<h2 class="cf-subheadline"><span data-translate="unable_to_access">You are unable to access</span> shop.example</h2></div>
<div class="cf-section cf-wrapper"><h2 data-translate="blocked_why_headline">Why have I been blocked?</h2>
<p data-translate="blocked_why_detail">This website is using a security service to protect itself from online attacks.</p></div>
<span class="cf-footer-item">Cloudflare Ray ID: <strong>8f0a1b2c3d4e5f60</strong></span></div></div></body></html>`

const dataDomeBlocked = `<html lang="en"><head><title>shop.example</title>
<style>#cmsg{animation: A 1.5s;}@keyframes A{0%{opacity:0;}99%{opacity:0;}100%{opacity:1;}}</style></head>
<body style="margin:0"><p id="cmsg">Please enable JS and disable any ad blocker</p>
<script data-cfasync="false">var dd={'rt':'c','cid':'AHrlqAAAAAMAx1','hsh':'2211F522B61E269B869FA6EAFFB5E1','t':'fe','s':17434,'e':'b0a1','host':'geo.captcha-delivery.com','cookie':'abc'}</script>
<script data-cfasync="false" src="https://ct.captcha-delivery.com/c.js"></script></body></html>`

const perimeterXBlocked = `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><meta name="description" content="px-captcha">
<title>Access to this page has been denied</title></head>
<body><script>
  window._pxVid = ''; window._pxUuid = '00000000-742d-11ef-b4ae-000000000000';
  window._pxAppId = 'PXaBcDeFgH'; window._pxHostUrl = '/aBcDeFgH/xhr'; window._pxJsClientSrc = '/aBcDeFgH/init.js';
  var script = document.createElement('script'); script.src = '/aBcDeFgH/captcha/captcha.js?a=c&u=00000000&m=0';
  document.head.appendChild(script);
</script><div class="px-captcha-container"><div class="px-captcha-header">Before we continue...</div>
<div class="px-captcha-message">Press &amp; Hold to confirm you are a human (and not a bot).</div>
<div id="px-captcha"></div></div></body></html>`

const amazonCaptcha = `<!doctype html><html lang="en-us" class="a-no-js"><head><meta charset="utf-8">
<title dir="ltr">Amazon.com</title><meta name="viewport" content="width=device-width"></head>
<body><div class="a-container a-padding-double-large"><div class="a-box a-alert a-alert-info a-spacing-base"><div class="a-box-inner">
<h4>Enter the characters you see below</h4><p class="a-last">Sorry, we just need to make sure you're not a robot.</p></div></div>
<div class="a-section"><form method="get" action="/errors/validateCaptcha" name="">
<input type=hidden name="amzn" value="abc" /><input type=hidden name="amzn-r" value="&#047;dp&#047;B000000000" />
<h4>Type the characters you see in this image:</h4><img src="https://images-na.ssl-images-amazon.com/captcha/abc/Captcha_xyz.jpg">
<input autocomplete="off" placeholder="Type characters" id="captchacharacters" name="field-keywords" type="text">
<button type="submit" class="a-button-text">Continue shopping</button></form></div></div></body></html>`

// akamaiDenied spells its text with character references, as Akamai does.
const akamaiDenied = `<HTML><HEAD>
<TITLE>Access Denied</TITLE>
</HEAD><BODY>
<H1>Access Denied</H1>
 
You don't have permission to access "http&#58;&#47;&#47;www&#46;shop&#46;example&#47;p&#47;42" on this server.<P>
Reference&#32;&#35;18&#46;2f1e1d17&#46;1700000000&#46;3a4b5c6d
<P>https&#58;&#47;&#47;errors&#46;edgesuite&#46;net&#47;18&#46;2f1e1d17&#46;1700000000&#46;3a4b5c6d</P>
</BODY>
</HTML>`

// akamaiBehavioural is Akamai Bot Manager's behavioural ("press and hold")
// challenge, served with 200 in place of the page: an untitled page whose
// hidden sec-if-cpt-container holds the tiles, the button and the
// "Powered and protected by" Akamai logo, and a script that reloads once
// the challenge's script has answered.
const akamaiBehavioural = `<!DOCTYPE html>
<html>
<body><script type="text/javascript" src="/Qm7vTz/aX3kPl/9fRw2c/Ei1u"></script>
<div id="sec-if-cpt-container" role="main" style="display: none">
    <div class="behavioral-content">
        <div id="sec-bc-text-container"></div>
        <div id="sec-bc-tile-parent"><div id="sec-bc-tile-container"></div></div>
        <div class="sec-bc-button-parent">
            <div class="behavioral-button progress-btn-disabled">
                <div class="btn" id="progress-button" role="button" tabindex="0" disabled></div>
                <div class="progress"></div>
            </div>
        </div>
        <div class="scf-akamai-logo-sec-abc">
            <div class="scf-akamai-logo-msg"><p class="scf-akamai-protected-by">Powered and protected by</p></div>
            <div class="scf-akamai-logo-img"><img src="https://www.akamai.com/site/en/images/logo/akamai-logo1.svg" class="scf-akamai-logo" alt="Akamai"></div>
            <div class="akamai-privacy"><a href="https://www.akamai.com/privacy" target="_blank">Privacy</a></div>
        </div>
    </div>
</div>
<script type="text/javascript" src="https://www.shop.example/public/8c41a0e2f7d9?t=73920155"></script><script>
    (function() {
        var chlgeId = '';
        var scripts = document.getElementsByTagName('script');
        for (var i = 0; i < scripts.length; i++) {
            if (scripts[i].src && scripts[i].src.match(/t=([^&#]*)/)) { chlgeId = scripts[i].src.match(/t=([^&#]*)/)[1]; }
        }
        var proxied = window.XMLHttpRequest.prototype.send;
        window.XMLHttpRequest.prototype.send = function() {
            var pointer = this;
            var intervalId = window.setInterval(function() {
                if (pointer.readyState === 4 && pointer.responseURL && pointer.responseURL.indexOf('t=' + chlgeId) > -1) {
                    location.reload(true);
                    clearInterval(intervalId);
                }
            }, 1);
            return proxied.apply(this, [].slice.call(arguments));
        };
    })();
</script>
<script type="text/javascript" src="/Qm7vTz/aX3kPl/9fRw2c/Ei1u"></script></body>
</html>`

// akamaiCrypto is Bot Manager's proof-of-work challenge as a navigation
// gets it (the same challenge answers an API call 428 with JSON): an
// iframe with the base64 challenge, its wait and the cp_challenge page.
const akamaiCrypto = `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Challenge Validation</title>
<link rel="stylesheet" type="text/css" href="/_sec/cp_challenge/sec-cpt-4-5.css"></head><body>
<script type="text/javascript" src="/_sec/cp_challenge/sec-cpt-4-5.js" async defer></script>
<div id="sec-container"><div id="sec-text-container"><iframe title="Challenge Content" id="sec-cpt-if" provider="crypto" class="crypto"
challenge="eyJ0b2tlbiI6IkFBUVNoYXJlZCIsInRpbWVzdGFtcCI6MTcwMDAwMDAwMCwibm9uY2UiOiI0ZjJhIiwiZGlmZmljdWx0eSI6NCwidGltZW91dCI6MTAwMDB9"
data-key="" data-duration=5 src="/_sec/cp_challenge/ak-challenge-4-5.htm"></iframe></div></div></body></html>`

// incapsulaNoscript is Imperva's block page in the form that loads its
// resource as a script and says the incident in a noscript.
const incapsulaNoscript = `<html><head><META NAME="robots" CONTENT="noindex,nofollow">
<script src="/_Incapsula_Resource?SWJIYLWA=5074a744e2e3d891814e9a2dace20bd4,719d34d31c8e3a6e6fffd425f7e032f3"></script></head>
<body><noscript>Request unsuccessful. Incapsula incident ID: 1234000560078901-234567890123456</noscript></body></html>`

const incapsulaBlocked = `<html style="height:100%"><head><META NAME="ROBOTS" CONTENT="NOINDEX, NOFOLLOW">
<meta name="format-detection" content="telephone=no"><meta name="viewport" content="initial-scale=1.0"></head>
<body style="margin:0px;height:100%"><iframe id="main-iframe" src="/_Incapsula_Resource?CWUDNSAI=23&xinfo=5-1234-0&incident_id=123-456&edet=15" frameborder=0 width="100%" height="100%">Request unsuccessful. Incapsula incident ID: 123-456</iframe></body></html>`

const recaptchaInterstitial = `<html><head><title>Security check</title>
<script src="https://www.google.com/recaptcha/api.js" async defer></script></head>
<body><h1>One more step</h1><p>Please complete the security check to continue.</p>
<form action="/verify" method="POST"><div class="g-recaptcha" data-sitekey="6Lc_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"></div>
<button>Continue</button></form></body></html>`

// alibabaPunish is Alibaba's slider captcha as AliExpress serves it in
// place of a search page: the punish-component, its config naming the
// /_____tmd_____/punish URL with x5secdata, the nocaptcha container the
// slider ("Slide to verify") renders into, and the punish page script.
const alibabaPunish = `<!DOCTYPE html><html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1,minimum-scale=1,maximum-scale=1,user-scalable=no" />
<link rel="stylesheet" href="https://g.alicdn.com/bsop-static/sufei-punish/0.1.91/build/main.css"></head>
<body><punish-component /><script>
window._config_ = {"renderTo":"#nocaptcha","action":"captcha","HOST":"www.aliexpress.com:443","PATH":"/w/wholesale-usb-c-cable.html",
"FORMACTIOIN":"/_____tmd_____/verify/","BXSTEP":"100","SECDATA":"5e0c8e13sample","NCAPPKEY":"X82Y__sample",
"url":"/w/wholesale-usb-c-cable.html/_____tmd_____/punish?x5secdata=5e0c8e13sample&x5step=1"};
</script><div id="nocaptcha"><div id="nc_1_wrapper"><div id="nc_1_n1t" class="nc_scale"><span id="nc_1_n1z" class="nc_iconfont btn_slide"></span>
<div id="nc_1__scale_text" class="scale_text"><span class="nc-lang-cnt">Please slide to verify</span></div></div></div></div>
<!--rgv587_flag:sm-->
</body><script charset="utf-8" src="//g.alicdn.com/bsop-static/sufei-punish/0.1.91/build/punishpage.min.js" crossorigin></script></html>`

// productText is enough visible text for an ordinary page.
var productText = strings.Repeat(`<p>The Trail Runner 3 pairs a cushioned midsole with a grippy outsole for
mixed terrain; its breathable mesh upper dries fast and the gusseted tongue keeps grit out.</p>`, 20)

func TestChallenge(t *testing.T) {
	cases := []struct{ name, page, reason string }{
		{"cloudflare managed challenge", cloudflareManaged, "cloudflare challenge: _cf_chl_opt script"},
		{"cloudflare challenge, localized title", strings.Replace(cloudflareManaged, "Just a moment...", "Un instant…", 1),
			"cloudflare challenge: _cf_chl_opt script"},
		{"cloudflare challenge, title only", `<html><head><title> Just a
			moment... </title></head><body></body></html>`, "cloudflare challenge: title"},
		{"cloudflare legacy challenge form", `<html><head><title>Please Wait... | Cloudflare</title></head><body>
			<form id="challenge-form" action="/p/42?__cf_chl_jschl_tk__=abc" method="POST"><input type="hidden" name="r" value="x"></form></body></html>`,
			"cloudflare challenge: __cf_chl_ form"},
		{"cloudflare orchestrated script", `<html><body><div id="challenge-stage"></div>
			<script src="/cdn-cgi/challenge-platform/h/b/orchestrate/managed/v1?ray=1"></script></body></html>`,
			"cloudflare challenge: challenge-platform orchestration"},
		{"cloudflare block", cloudflareBlocked, "cloudflare block: block headline"},
		{"cloudflare 1020", `<html><head><title>Access denied | shop.example used Cloudflare to restrict access</title></head>
			<body><div id="cf-wrapper"><h1>Error 1020</h1></div></body></html>`, "cloudflare block: title"},
		{"datadome", dataDomeBlocked, "datadome captcha: captcha-delivery.com dd script"},
		{"datadome iframe", `<html><head><title>shop.example</title></head><body><iframe src="https://geo.captcha-delivery.com/captcha/?initialCid=AHrl&cid=abc&t=fe" title="DataDome CAPTCHA" width="100%" height="100%" frameborder="0"></iframe></body></html>`,
			"datadome captcha: captcha-delivery.com iframe"},
		{"perimeterx", perimeterXBlocked, "perimeterx captcha: px-captcha meta"},
		{"perimeterx element only", `<html><head><title>Please verify you are a human</title></head><body><div id="px-captcha"></div></body></html>`,
			"perimeterx captcha: px-captcha element"},
		{"perimeterx title only", `<html><head><title>Access to this page has been denied.</title></head><body>` + productText + `</body></html>`,
			"perimeterx block: title"},
		{"perimeterx app id on a near-empty page", `<html><head><title>shop.example</title></head><body>
			<script>window._pxAppId = 'PXaBcDeFgH';</script><div class="message">Please wait</div></body></html>`,
			"perimeterx block: _pxAppId on a near-empty page"},
		{"amazon captcha", amazonCaptcha, "amazon captcha: validateCaptcha form"},
		{"amazon continue-shopping captcha", `<!doctype html><html lang="en-us" class="a-no-js"><head><title dir="ltr">Amazon.com</title>
			<script>var ue_sn = "opfcaptcha.amazon.com", ue_id = 'Q3ZB7HN0000000000000';</script></head><body>
			<!-- To discuss automated access to Amazon data please contact api-services-support@amazon.com. -->
			<div class="a-box a-alert a-alert-info a-spacing-base"><h4>Click the button below to continue shopping</h4></div>
			<form method="get" action="/errors/validateCaptcha" name=""><input type=hidden name="amzn" value="Zm9vYmFy" />
			<input type=hidden name="amzn-r" value="&#047;dp&#047;B0C0000000" /><input type=hidden name="field-keywords" value="KXWTPM" />
			<button type="submit" class="a-button-text" alt="Continue shopping">Continue shopping</button></form></body></html>`,
			"amazon captcha: validateCaptcha form"},
		{"datadome interstitial", `<html lang="en"><head><title>shop.example</title></head><body style="margin:0"><p id="cmsg">Please enable JS and disable any ad blocker</p>
			<script data-cfasync="false">var dd={'rt':'i','cid':'AHrlqAAAAAMA9x','hsh':'0A1B2C3D4E5F60718293A4B5C6D7E8','b':1234567,'s':40411,'e':'9f8e7d','qp':'','host':'geo.captcha-delivery.com','cookie':'xyz'}</script>
			<script data-cfasync="false" src="https://ct.captcha-delivery.com/i.js"></script></body></html>`,
			"datadome captcha: captcha-delivery.com dd script"},
		{"amazon robot check title", `<html><head><title>Robot Check</title></head><body>` + productText + `</body></html>`,
			"amazon captcha: title"},
		{"akamai", akamaiDenied, "akamai block: Access Denied with a reference"},
		{"akamai behavioural challenge", akamaiBehavioural, "akamai challenge: behavioural challenge container"},
		{"akamai crypto challenge", akamaiCrypto, "akamai challenge: cp_challenge script"},
		{"akamai crypto challenge iframe", `<html><body><iframe id="sec-cpt-if" provider="crypto" data-duration=5></iframe></body></html>`, "akamai challenge: sec-cpt-if iframe"},
		{"akamai cp_challenge script", `<html><head><title>shop.example</title></head><body>` + productText +
			`<script src="https://www.shop.example/_sec/cp_challenge/sec-cpt-4-5.js"></script></body></html>`,
			"akamai challenge: cp_challenge script"},
		{"distil", `<!DOCTYPE html><html><head><title>Pardon Our Interruption</title></head><body><div class="container">
			<h1>Pardon Our Interruption...</h1><p>As you were browsing something about your browser made us think you were a bot.</p></div></body></html>`,
			"distil/imperva block: title"},
		{"incapsula", incapsulaBlocked, "incapsula block: _Incapsula_Resource iframe"},
		{"incapsula script and noscript incident", incapsulaNoscript, "incapsula block: incident ID"},
		{"incapsula script on a near-empty page", `<html><head><script src="/_Incapsula_Resource?SWJIYLWA=5074a744e2e3d891"></script></head><body></body></html>`,
			"incapsula block: _Incapsula_Resource script on a near-empty page"},
		{"incapsula incident text on a near-empty page", `<html><body><p>Request unsuccessful. Incapsula incident ID: 1234000560078901-234567890123456</p></body></html>`,
			"incapsula block: incident ID on a near-empty page"},
		{"ddos-guard", `<html><head><title>DDoS-Guard</title></head><body><div id="ddg-l"></div></body></html>`, "ddos-guard challenge: title"},
		{"recaptcha interstitial", recaptchaInterstitial, "captcha page: g-recaptcha widget on a near-empty page"},
		{"hcaptcha interstitial", `<html><head><title>Verify</title></head><body><p>Verify you are human.</p>
			<div class="h-captcha" data-sitekey="10000000-ffff-ffff-ffff-000000000001"></div></body></html>`,
			"captcha page: h-captcha widget on a near-empty page"},
		{"turnstile iframe interstitial", `<html><body><iframe src="https://challenges.cloudflare.com/cdn-cgi/challenge-platform/h/b/turnstile/if/ov2/av0/rcv/abc"></iframe></body></html>`,
			"captcha page: captcha iframe on a near-empty page"},
		{"bare access denied", `<html><head><title>Access Denied</title></head><body><h1>Access Denied</h1></body></html>`,
			"access denied page: title on a near-empty page"},
		{"alibaba punish page", alibabaPunish, "alibaba captcha: punish-component element"},
		{"alibaba punish page script only", `<html><head><title>AliExpress</title></head><body>` + productText +
			`<script src="https://g.alicdn.com/bsop-static/sufei-punish/0.1.91/build/punishpage.min.js"></script></body></html>`,
			"alibaba captcha: punish page script"},
		{"alibaba verify form", `<html><body><form id="nc-verify-form" action="/_____tmd_____/verify/" method="get">` +
			`<input name="nc_token" type="hidden"></form></body></html>`, "alibaba captcha: _____tmd_____ form"},
		{"alibaba punish iframe", `<html><body><div class="baxia-dialog"><iframe src="https://www.aliexpress.com/w/x.html/_____tmd_____/punish?x5secdata=abc&x5step=2"></iframe></div></body></html>`,
			"alibaba captcha: _____tmd_____ iframe"},
		{"alibaba title", `<html><head><title>Captcha Interception</title></head><body>` + productText + `</body></html>`,
			"alibaba captcha: title"},
		{"alibaba title in Chinese", `<html><head><title>验证码拦截</title></head><body></body></html>`, "alibaba captcha: title"},
		{"alibaba config script on a near-empty page", `<html><body><script>window._config_ = {"action":"captcha",` +
			`"url":"https://www.aliexpress.com//w/x.html/_____tmd_____/punish?x5secdata=abc&x5step=1"};</script></body></html>`,
			"alibaba captcha: punish URL script on a near-empty page"},
		{"alibaba slider on a near-empty page", `<html><body><div id="nocaptcha"><div id="nc_1_wrapper"></div></div></body></html>`,
			"alibaba captcha: nocaptcha slider on a near-empty page"},
		{"alibaba deny page flag", `<html><body><p>Unusual traffic detected, please try again later</p><!--rgv587_flag:sm--></body></html>`,
			"alibaba captcha: rgv587_flag comment on a near-empty page"},
		{"uppercase tags and a byte order mark", "\uFEFF<HTML><HEAD><TITLE>Robot Check</TITLE></HEAD></HTML>", "amazon captcha: title"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reason, blocked := htmldata.Challenge([]byte(c.page))
			if !blocked || reason != c.reason {
				t.Fatalf("got %q, %v; want %q", reason, blocked, c.reason)
			}
		})
	}
}

// TestChallengeLookAlikes: ordinary pages that carry the same widgets,
// vendor snippets or words must not count as blocked.
func TestChallengeLookAlikes(t *testing.T) {
	cases := map[string]string{
		"product with a newsletter reCAPTCHA": `<html><head><title>Trail Runner 3 – Acme</title>
			<script src="https://www.google.com/recaptcha/api.js" async defer></script></head><body><h1>Trail Runner 3</h1>` + productText +
			`<form action="/newsletter"><input name="email"><div class="g-recaptcha" data-sitekey="6Lc_a"></div></form></body></html>`,
		"app shell with invisible reCAPTCHA v3": `<html><head><title>Acme</title>
			<script src="https://www.google.com/recaptcha/api.js?render=6Lc_a"></script></head><body><div id="root"></div></body></html>`,
		"login form with Turnstile": `<html><head><title>Sign in – Acme</title>
			<script src="https://challenges.cloudflare.com/turnstile/v0/api.js" async defer></script></head><body>` + productText +
			`<form action="/login"><div class="cf-turnstile" data-sitekey="0x4AAA"></div></form></body></html>`,
		"cloudflare bot-management beacon": `<html><head><title>Trail Runner 3</title></head><body>` + productText +
			`<script>(function(){function c(){var b=a.contentDocument||a.contentWindow.document;if(b){var d=b.createElement('script');
			d.innerHTML="window.__CF$cv$params={r:'8f0a1b2c3d4e5f60',t:'MTcwMDAwMDAwMA=='};var a=document.createElement('script');a.nonce='';a.src='/cdn-cgi/challenge-platform/scripts/jsd/main.js';document.getElementsByTagName('head')[0].appendChild(a);";
			b.getElementsByTagName('head')[0].appendChild(d)}}}());</script>
			<script src="/cdn-cgi/challenge-platform/scripts/invisible.js"></script></body></html>`,
		"perimeterx sensor on an ordinary page": `<html><head><title>Trail Runner 3</title>
			<script>window._pxAppId = 'PXaBcDeFgH'; (function(){var p = document.createElement('script');
			p.src = '//client.perimeterx.net/PXaBcDeFgH/main.min.js'; document.head.appendChild(p);})();</script></head><body>` + productText + `</body></html>`,
		"datadome tag on an ordinary page": `<html><head><title>Trail Runner 3</title>
			<script>window.ddjskey = 'ABCDEF'; window.ddoptions = {ajaxListenerPath: true};</script>
			<script src="https://js.datadome.co/tags.js" async></script></head><body>` + productText + `</body></html>`,
		"product titled like a block page":               `<html><head><title>Access Denied (Blu-ray)</title></head><body>` + productText + `</body></html>`,
		"film titled Access Denied with a long synopsis": `<html><head><title>Access Denied</title></head><body>` + productText + `</body></html>`,
		"article quoting block pages": `<html><head><title>How bot walls work</title></head><body>` + productText +
			`<p>Pages titled "Just a moment..." or "Attention Required! | Cloudflare" or "Robot Check" carry a Reference #18.</p>
			<pre><code>&lt;div id="px-captcha"&gt;&lt;/div&gt; window._cf_chl_opt = {}; var dd={'host':'geo.captcha-delivery.com'}</code></pre></body></html>`,
		"markers inside data scripts": `<html><head><title>Trail Runner 3</title></head><body><h1>Trail Runner 3</h1>
			<script id="__NEXT_DATA__" type="application/json">{"note":"window._cf_chl_opt = {}; var dd={'host':'geo.captcha-delivery.com'}"}</script></body></html>`,
		"an svg titled Robot Check after the real title": `<html><head><title>Robot vacuum R2</title></head><body>
			<svg><title>Robot Check</title></svg>` + productText + `</body></html>`,
		"aliexpress page with captcha SDKs and a login slider": `<html><head><title>Usb C Cable - AliExpress</title>
			<script src="//g.alicdn.com/sd/baxia-entry/baxiaCommon.js"></script><script src="//g.alicdn.com/AWSC/AWSC/awsc.js"></script>
			<script src="//g.alicdn.com/sd/ncpc/nc.js?t=2015052012"></script>
			<script>window.baxiaCommon && baxiaCommon.init({checkApiPath: function (p) { return p.indexOf("/_____tmd_____/punish?x5secdata=") < 0 }});</script>
			</head><body><h1>Usb C Cable</h1>` + productText + `<form action="/login"><div id="nocaptcha"><div id="nc_1_wrapper"></div></div></form>
			<!-- the page's own comment, not rgv587 --></body></html>`,
		"help article about the slider captcha": `<html><head><title>Why do I see "Captcha Interception"? – Help</title></head><body>` + productText +
			`<p>If a page titled Captcha Interception asks you to slide to verify, the address holds /_____tmd_____/punish?x5secdata=…</p>
			<pre><code>&lt;punish-component /&gt; &lt;div id="nocaptcha"&gt; &lt;!--rgv587_flag:sm--&gt;</code></pre></body></html>`,
		"product titled like the captcha page": `<html><head><title>Captcha Interception Kit</title></head><body>` + productText + `</body></html>`,
		"punish URL in a data script": `<html><head><title>Usb C Cable</title></head><body><div id="root"></div>
			<script type="application/json">{"redirect":"/_____tmd_____/punish?x5secdata=abc"}</script></body></html>`,
		"akamai sensor on an ordinary page": `<html><head><title>Trail Runner 3</title>
			<script type="text/javascript" src="/Qm7vTz/aX3kPl/9fRw2c/Ei1u"></script><script src="/akam/13/6b1f2e3d" defer></script></head><body>` + productText +
			`<footer><p>Powered and protected by Akamai</p></footer><noscript><img src="/akam/13/pixel_6b1f2e3d?a=dD0x" style="visibility: hidden; position: absolute; left: -999px; top: -999px;" /></noscript></body></html>`,
		"incapsula script on an ordinary page": `<html><head><title>Trail Runner 3</title>
			<script src="/_Incapsula_Resource?SWJIYLWA=5074a744e2e3d891&ns=2&cb=1162649131" async></script></head><body>` + productText + `</body></html>`,
		"article naming an Incapsula incident": `<html><head><title>Reading WAF errors</title></head><body>` + productText +
			`<p>The page said "Request unsuccessful. Incapsula incident ID: 123-456".</p></body></html>`,
		"empty page":   ``,
		"text only":    `just some text`,
		"Next.js page": nextProductPage,
	}
	for name, page := range cases {
		t.Run(name, func(t *testing.T) {
			if reason, blocked := htmldata.Challenge([]byte(page)); blocked || reason != "" {
				t.Fatalf("blocked: %q", reason)
			}
		})
	}
}
