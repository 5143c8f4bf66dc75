#version 330
// Blinn-Phong with a sky/ground hemisphere ambient and a headlight (light from the eye), so
// no face turned away from the key light goes black.  u_pattern > 0 shades six soft sectors
// around the body z axis so that the spin of a round body can be seen: sin(6 phi), phi the
// angle about z, from Im((x + iy)^6) = 2 x y (3x^4 - 10x^2 y^2 + 3y^4) over r^6, a
// polynomial, because the renderer may be software (Mesa llvmpipe) where atan per pixel is
// costly.  The sectors' edges are soft: hard ones read as facets on a smooth body.
uniform vec3 u_color;
uniform vec3 u_eye;
uniform vec3 u_light_dir;     // unit, towards the light
uniform float u_pattern;
uniform float u_highlight;
uniform float u_alpha;

in vec3 v_world;
in vec3 v_normal;
in vec3 v_local;

out vec4 f_color;

void main() {
    vec3 base = u_color;
    float x = v_local.x, y = v_local.y;
    float x2 = x * x, y2 = y * y;
    float r2 = x2 + y2;
    float sin6 = 2.0 * x * y * (3.0 * x2 * x2 - 10.0 * x2 * y2 + 3.0 * y2 * y2)
                 / max(r2 * r2 * r2, 1e-30);
    float sector = smoothstep(-0.6, 0.6, sin6);
    base *= 1.0 - 0.22 * u_pattern * sector;
    vec3 n = normalize(v_normal);
    vec3 v = normalize(u_eye - v_world);
    if (dot(n, v) < 0.0) n = -n;
    float diffuse = max(dot(n, u_light_dir), 0.0);
    vec3 h = normalize(u_light_dir + v);
    float specular = pow(max(dot(n, h), 0.0), 48.0) * 0.25;
    float hemi = 0.5 + 0.5 * n.z;
    vec3 ambient = mix(vec3(0.30, 0.28, 0.26), vec3(0.42, 0.45, 0.52), hemi);
    float headlight = 0.25 * max(dot(n, v), 0.0);
    vec3 rgb = base * (ambient + 0.65 * diffuse + headlight) + vec3(specular);
    rgb = mix(rgb, vec3(1.0), 0.25 * u_highlight);
    f_color = vec4(rgb, u_alpha);
}
